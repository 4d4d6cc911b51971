-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: table.unpack({}, 1, 990000) pushes 990,000 nils (about 10 ms) for one instruction; every value unpacked is charged before it runs, so the first call spends the budget (the neighbour, unpacking a small table, runs: test_charges.py)
while true do local n = select("#", table.unpack({}, 1, 990000)) end
