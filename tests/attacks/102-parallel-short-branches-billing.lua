-- expect: error reductions_limit
-- limits: {"max_reductions": 100000}
-- timeout_ms: 10000
-- why: every branch of parallel() is a new coroutine with its own hook countdown, so a branch that ends before its first hook call would never be charged by the hook; a branch pays its periods as they begin (4, 8, ... instructions), so a thousand branches of about 104 instructions each are billed at least 104,000 and cannot hide from a 100,000 budget (the neighbour, 500 of them, completes: test_parallel.py)
for i = 1, 1000 do
  parallel(function() for j = 1, 100 do end end)
end
return "escaped"
