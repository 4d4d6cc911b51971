-- bench/unwind_bill.lua - the rate at which the sandbox bills a caught error
-- at a deep stack (CHARGE_UNWIND_FREE, CHARGE_UNWIND_LEVEL in worker/charge.h).
-- Run with the stock interpreter: lua5.3 bench/unwind_bill.lua (the figures
-- vary with the machine's load: page faults dominate the deep cases).
--
-- A caught error makes luaD_pcall shrink the stack, which walks every frame;
-- the sandbox finds the depth with lua_getstack probes at doubling levels,
-- the same walk again.  This measures, in the same run, the CPU time of one
-- VM instruction and of one caught error at several depths, and prints the
-- cost of an error in instructions per `level` (the deepest probe that
-- exists: more than half the depth).  The cost is more than the walk where
-- the shrink reallocates the stack (luaD_shrinkstack), which depends on how
-- the stack grew.  CHARGE_UNWIND_LEVEL must be above the dearest figure plus the
-- probes' own walk (about two levels' worth of frames).

local function instruction_ns()
  local c = os.clock()
  local x = 0
  for i = 1, 20000000 do x = x + i end
  return (os.clock() - c) / 40000000 * 1e9
end

local ins = instruction_ns()
print(string.format("one instruction: %.2f ns", ins))
print(string.format("%10s %8s %14s %22s", "depth", "level", "ns per error", "instructions per level"))
local dearest = 0
for _, depth in ipairs{2000, 10000, 50000, 100000, 120000, 150000, 180000, 200000} do
  local function run()
    local c = os.clock()
    for _ = 1, 200 do pcall(error, 1) end
    return os.clock() - c
  end
  local function deep(n)
    if n > 0 then return deep(n - 1) + 0 end
    return run()
  end
  local ok, t = pcall(deep, depth)
  if not ok then break end
  local per = (t - run()) / 200 * 1e9
  local level = 1024
  while level * 2 <= depth do level = level * 2 end
  -- the sandbox's probes walk about 2 x level frames more, at the cost of
  -- the shallowest case's frames per instruction
  local need = per / ins / level
  dearest = math.max(dearest, need)
  print(string.format("%10d %8d %14.0f %22.2f", depth, level, per, need))
end
print(string.format("dearest: %.2f instructions per level, plus the probes' ~1.5; billed: 64", dearest))
