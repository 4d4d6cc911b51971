-- expect: ok
-- value: [8388608, 8388609, false, "resulting string too large"]
-- limits: {"max_heap": 16777218}
-- why: the string cap is half of max_heap (8388609 bytes here) and exact: string.rep builds a string of the cap and one byte less (a stock rep would need a buffer as large again, past the heap), and one byte more is the catchable error
local cap = 8388609
local a = #string.rep("x", cap - 1)
local b = #string.rep("x", cap)
local ok, e = pcall(string.rep, "x", cap + 1)
return a, b, ok, (e:gsub("^.-:%d+: ", ""))
