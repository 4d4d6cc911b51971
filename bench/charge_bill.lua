-- bench/charge_bill.lua - what the library work that the instruction budget
-- charges (worker/charge.h) costs, against one VM instruction.
-- Run with the stock interpreter: lua5.3 bench/charge_bill.lua
--
-- For each kind of charged work it measures the CPU time per unit (byte,
-- value, step, ...) and, in the same run, of one VM instruction, and prints
-- how many instructions' worth of CPU one reduction of its charge buys
-- ("instr/red"): 1 would be a charge that costs exactly what an instruction
-- does.  The rates below repeat charge.h's; the string production rows use
-- `..` (sandboxd's string.rep copies with memcpy; the stock one, measured
-- here, does not).

local BYTES, EACH = 64, 4       -- CHARGE_BYTES, CHARGE_EACH_BYTES
local SORT, TABLE = 4, 4        -- CHARGE_SORT_LEVEL, CHARGE_TABLE_VALUE
local DATE = 64                 -- CHARGE_DATE_CONVERSION

local function instruction_ns()
  local c = os.clock()
  local x = 0
  for i = 1, 20000000 do x = x + i end
  return (os.clock() - c) / 40000000 * 1e9
end

local ins = instruction_ns()
print(string.format("one instruction: %.2f ns", ins))
print(string.format("%-34s %12s %12s %10s", "work", "ns/unit", "units/red", "instr/red"))
local dearest = 0
local function row(name, units_per_red, n, units, f)
  f(0)
  local c = os.clock()
  for i = 1, n do f(i) end
  local ns = (os.clock() - c) / n * 1e9 / units
  local per = ns * units_per_red / ins
  dearest = math.max(dearest, per)
  print(string.format("%-34s %12.3f %12.4g %10.2f", name, ns, units_per_red, per))
end

local mb = string.rep("abcdefgh", 1 << 17)          -- 1 MiB
local t = {} for i = 1, 100000 do t[i] = (i * 7919) % 100003 end
local u = {}
local lines = {} for i = 1, 20000 do lines[i] = "line " .. i end

row("new string (s .. i, 1 MiB)", BYTES, 200, 1 << 20, function(i) return mb .. i end)
row("new string (sub, 64 KiB)", BYTES, 2000, 1 << 16, function(i) return mb:sub(i % 7 + 1, i % 7 + 65536) end)
row("plain find (memchr, 1 MiB)", BYTES, 300, 1 << 20, function() return mb:find("z", 1, true) end)
row("table.concat bytes (1 MiB)", BYTES, 200, 1 << 20, function() return table.concat({mb}) end)
row("upper (each byte)", EACH, 50, 1 << 20, function() return mb:upper() end)
row("reverse (each byte)", EACH, 50, 1 << 20, function() return mb:reverse() end)
row("format %q (each byte)", EACH, 50, 1 << 16, function() return string.format("%q", mb:sub(1, 65536)) end)
row("utf8.len (each byte)", EACH, 30, 1 << 20, function() return utf8.len(mb) end)
row("tonumber, 4 KiB of digits", EACH, 200, 4096, function() return tonumber(("1"):rep(4096)) end)
row("load, long literal (each byte)", EACH, 20, 1 << 20, function() return load("return '" .. mb .. "'") end)
row("os.date %c (conversions)", 1 / DATE, 50, 4000, function() return os.date(("%c"):rep(4000), 0) end)
row("string.byte (values)", 1, 200, 10000, function() return select("#", mb:byte(1, 10000)) end)
row("table.unpack (values)", 1, 200, 10000, function() return select("#", table.unpack(t, 1, 10000)) end)
row("table.insert at 1 (values moved)", 1 / TABLE, 100, 20000,
    function() table.insert(lines, 1, "x") table.remove(lines, 1) end)
row("table.concat (items)", 1 / TABLE, 20, 20000, function() return table.concat(lines, ",") end)
row("pattern steps (a-b on 2 KiB of a)", 1, 5, 2048 * 2049 / 2 * 2,
    function() return mb:sub(1, 2048):gsub("[^a]", "a"):find("a-b") end)
row("table.sort, numbers (n log2 n)", 1 / SORT, 10, 100000 * 17, function()
  for i = 1, 100000 do u[i] = t[i] end
  table.sort(u)
end)
print(string.format("dearest: one reduction buys %.1f instructions' worth of CPU", dearest))
