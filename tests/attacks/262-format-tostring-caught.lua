-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000, "max_heap": 512000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: string.format("%s%d", t, {}) copies what t's __tostring gives (4 MiB) into a buffer and then fails at %d; a loop of caught failures would copy 4 MiB per few instructions without making a string; the text a __tostring gives is charged by its bytes before format copies it (the neighbour, formatting objects with __tostring, runs: test_charges.py)
local big = string.rep("x", 4 << 20)
local t = setmetatable({}, {__tostring = function() return big end})
while true do pcall(string.format, "%s%d", t, {}) end
