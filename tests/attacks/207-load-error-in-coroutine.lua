-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: the load-reader error inside a coroutine (wrap and resume) and then in the main thread; after all of them the loop is still counted
coroutine.wrap(function() load(function() return {} end) end)()
coroutine.resume(coroutine.create(function() load(function() error("x") end) end))
load(function() return true end)
while true do end
