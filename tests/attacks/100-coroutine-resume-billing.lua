-- expect: error reductions_limit
-- limits: {"max_reductions": 200000}
-- timeout_ms: 10000
-- why: each coroutine keeps its own hook countdown, so one that ends before its first hook call would never be charged by the hook; a new coroutine pays its first period (4 instructions) when it is made and each next one (8, 16, ... up to 1000) as it begins, so a thousand coroutines of about 900 instructions each are billed at least 900,000 and cannot hide from a 200,000 budget (the neighbour, 100 of them under the same budget, completes: test_charges.py)
for i = 1, 1000 do
  coroutine.wrap(function() for j = 1, 900 do end end)()
end
return "escaped"
