-- expect: error timeout
-- limits: {"max_reductions": 100000000}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: six nested .- over 3000 characters with a failing tail: astronomically long matching inside one C call; the wall clock must stop it
return ("x"):rep(3000):find(".-.-.-.-.-.-y")
