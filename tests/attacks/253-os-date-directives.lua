-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: os.date formats each of 20,000 %c directives with strftime (milliseconds per call, one instruction); each byte of the format is charged, one reduction per 4, so the first call spends the budget (the neighbour, an ordinary date format, runs: test_charges.py)
local f = string.rep("%c", 20000)
while true do local d = os.date(f, 0) end
