-- expect: error reductions_limit
-- limits: {"max_reductions": 200000}
-- timeout_ms: 10000
-- why: every branch of parallel() is a new coroutine with its own hook countdown, so a branch that runs fewer instructions than the hook period is never charged by the hook; parallel() bills every resume one period (as coroutine.resume does), so a thousand short branches cost at least 1,000,000 and cannot hide from a 200,000 budget
for i = 1, 1000 do
  parallel(function() for j = 1, 100 do end end)
end
return "escaped"
