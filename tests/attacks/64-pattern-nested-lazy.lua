-- expect: error reductions_limit
-- limits: {"max_reductions": 100000}
-- timeout_ms: 10000
-- max_wall_ms: 1000
-- why: six nested .- over 3000 characters with a failing tail: astronomically long matching inside one C call, which the count hook never sees; every step of the matcher is charged as it goes, so the budget stops it within milliseconds (the neighbour, a lazy pattern that matches, runs: test_charges.py)
return ("x"):rep(3000):find(".-.-.-.-.-.-y")
