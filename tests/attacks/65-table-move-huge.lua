-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: table.move over an empty table with a 2^62 range moves nils forever in constant memory with no VM instruction (F10); it is charged four reductions per value moved before it runs, so a budget of 1000 stops it at once (the neighbour, moving 500 values, runs: test_charges.py)
table.move({}, 1, 1 << 62, 2)
return "escaped"
