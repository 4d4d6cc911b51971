-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: a load reader that yields (an error: a C call boundary), in a coroutine and in the main thread; load catches it, and the budget still stops the loop after
local co = coroutine.wrap(function() return load(function() coroutine.yield(1) end) end)
local f, e = co()
assert(f == nil and e:find("yield"), e)
local g, e2 = load(function() coroutine.yield(2) end)
assert(g == nil and e2:find("yield"), e2)
while true do end
