-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: with 20 MiB of live closures, every refused `..` (over the string cap) makes the core run an emergency full collection before it gives up: a loop of refusals buys tens of milliseconds of collector work per few instructions unless the collections are billed to the budget
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
local s = string.rep("x", (16 << 20) + 64)
while true do pcall(function() return s .. s end) end
