-- expect: error reductions_limit
-- limits: {"max_reductions": 200000}
-- timeout_ms: 10000
-- why: each coroutine keeps its own hook countdown, so one that runs under a hook period is never charged by the hook; every resume is billed one period, so a thousand short coroutines (about 900 instructions each) cost at least 1,000,000 and cannot hide from a 200,000 budget
for i = 1, 1000 do
  coroutine.wrap(function() for j = 1, 900 do end end)()
end
return "escaped"
