-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- max_wall_ms: 3000
-- why: a plain endless loop must end with reductions_limit long before the wall clock
while true do end
