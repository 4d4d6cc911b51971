-- expect: ok
-- value: [8388608, 8388609, false, "resulting string too large"]
-- limits: {"max_heap": 16777218}
-- why: table.concat at the exact string cap (the stock function's buffer plus the result would be the whole heap)
local cap = 8388609
local s = string.rep("x", (cap - 1) // 2)
local a = #table.concat({s, s})
local b = #table.concat({s, s}, "x")
local ok, e = pcall(table.concat, {s, s}, "xy")
return a, b, ok, (e:gsub("^.-:%d+: ", ""))
