-- expect: error timeout
-- limits: {"max_reductions": "infinity"}
-- timeout_ms: 1500
-- why: an exponential pattern (40 optional items against 40 characters, about 2^40 steps) runs in C; without an instruction budget nothing inside the worker stops it (with one, its steps are charged: 247-pattern-backtracking), so the supervisor's wall clock must
local s = string.rep("a", 40)
return string.find(s, string.rep("a?", 40) .. string.rep("a", 40) .. "b")
