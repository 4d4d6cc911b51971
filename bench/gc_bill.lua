-- bench/gc_bill.lua - the rate at which the sandbox bills a full garbage
-- collection to the instruction budget (CHARGE_GC_BYTES in
-- worker/charge.h).  Run with the stock interpreter: lua5.3 bench/gc_bill.lua
--
-- For heaps of different object kinds it measures the CPU time of a full
-- collection and, in the same run, the CPU time of one VM instruction (a
-- numeric for loop with one addition: two instructions per iteration), and
-- prints how many bytes of heap cost as much to collect as one instruction.
-- The billing rate must not exceed the smallest figure (the dearest kind),
-- or a loop that forces collections gets CPU the budget does not see.

local function instruction_ns()
  local c = os.clock()
  local x = 0
  for i = 1, 20000000 do x = x + i end
  return (os.clock() - c) / 40000000 * 1e9
end

local ins = instruction_ns()
local kinds = {
  {"empty tables", function(i) return {} end},
  {"array tables", function(i) return {i, i} end},
  {"hash tables", function(i) return {a = i, b = i} end},
  {"short strings", function(i) return "s" .. i end},
  {"closures", function(i) return function() return i end end},
  {"nested tables", function(i) return {{}, {}} end},
  {"tables with metatables", function(i) return setmetatable({}, {}) end},
  {"coroutines", function(i) return coroutine.create(print) end},
  {"long strings", function(i) return string.rep("x", 4000) .. i end},
}
print(string.format("one instruction: %.2f ns", ins))
print(string.format("%-24s %9s %10s %14s", "heap of", "MiB", "full gc ms", "bytes/instr"))
local dearest = math.huge
for _, k in ipairs(kinds) do
  local t = {}
  local n = k[1] == "long strings" and 5000 or 200000
  for i = 1, n do t[i] = k[2](i) end
  collectgarbage()
  local bytes = collectgarbage("count") * 1024
  local c = os.clock()
  for _ = 1, 5 do collectgarbage() end
  local gc = (os.clock() - c) / 5
  local rate = bytes / (gc * 1e9 / ins)
  dearest = math.min(dearest, rate)
  print(string.format("%-24s %9.1f %10.2f %14.2f", k[1], bytes / 1048576, gc * 1000, rate))
  t = nil
  collectgarbage()
end
print(string.format("dearest: %.2f bytes per instruction (billed: 4)", dearest))
