-- expect: ok
-- value: [8388608, 8388609, false, "resulting string too large"]
-- limits: {"max_heap": 16777218}
-- why: `..` at the exact string cap: cap-1 and cap are built, cap+1 is refused with the catchable error (not one byte of slack)
local cap = 8388609
local s = string.rep("x", (cap - 1) // 2)
local a = #(s .. s)
local b = #(s .. s .. "x")
local ok, e = pcall(function() return s .. s .. "xy" end)
return a, b, ok, e
