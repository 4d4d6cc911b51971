-- expect: error timeout
-- limits: {"max_reductions": 100000000}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: an exponential pattern (40 optional items against 40 characters, about 2^40 steps) runs in C without ever reaching the count hook (F11); the supervisor's wall clock must stop it
local s = string.rep("a", 40)
return string.find(s, string.rep("a?", 40) .. string.rep("a", 40) .. "b")
