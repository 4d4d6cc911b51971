-- expect: error reductions_limit
-- limits: {"max_reductions": 1000, "max_heap": 512000000}
-- timeout_ms: 20000
-- max_wall_ms: 500
-- why: gsub copies a 3,000-byte replacement for each of 2,999 matches into a buffer (9 MB) and then fails at the last match, whose replacement is a table; a loop of caught failures would copy 9 MB per few instructions, but the bytes of each replacement are charged as it is added (the neighbour, gsub with replacements, runs: test_charges.py)
local s = string.rep("x", 2999) .. "z"
local t = {x = string.rep("y", 3000), z = {}}
while true do pcall(string.gsub, s, "[xz]", t) end
