-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: a load reader that builds a string over the cap, in a loop: each failed load costs an emergency collection, billed to the budget
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
local s = string.rep("x", (16 << 20) + 64)
while true do load(function() return s .. s end) end
