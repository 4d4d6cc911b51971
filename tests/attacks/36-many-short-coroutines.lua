-- expect: error reductions_limit
-- limits: {"max_reductions": 2000000}
-- timeout_ms: 5000
-- why: each coroutine has its own hook countdown (F3); many coroutines that each run under one hook period must still be charged (the hook is inherited)
while true do
  coroutine.wrap(function() for i = 1, 900 do end end)()
end
