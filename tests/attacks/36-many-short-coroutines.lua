-- expect: error reductions_limit
-- limits: {"max_reductions": 200000}
-- timeout_ms: 10000
-- max_wall_ms: 5000
-- why: each coroutine has its own hook countdown (F3) and one that runs under a hook period is never charged; the main thread's share must still end the run (the undercount is bounded by the period per coroutine, about 80x here)
while true do
  coroutine.wrap(function() for i = 1, 900 do end end)()
end
