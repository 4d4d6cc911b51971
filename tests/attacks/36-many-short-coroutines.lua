-- expect: error reductions_limit
-- limits: {"max_reductions": 200000}
-- timeout_ms: 10000
-- max_wall_ms: 5000
-- why: each coroutine has its own hook countdown (F3) and one that ends before its first hook call would never be charged by the hook; every coroutine pays its periods as they begin, so the loop is billed every instruction and ends
while true do
  coroutine.wrap(function() for i = 1, 900 do end end)()
end
