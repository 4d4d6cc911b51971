-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: the refused-concatenation loop inside a coroutine, each refusal caught by coroutine.wrap's caller: the collections are billed there too
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
local s = string.rep("x", (16 << 20) + 64)
while true do pcall(coroutine.wrap(function() return s .. s end)) end
