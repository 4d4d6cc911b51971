-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000, "max_heap": 512000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: print(t, bad) copied the 4 MiB text of t into its line and then failed in bad's __tostring; a loop of caught failures would copy 4 MiB per few instructions for nothing; print now makes every argument's text before it copies any, so a failing print copies nothing and the loop is only its instructions (the neighbour, printing a report, runs: test_execute.py)
local big = string.rep("x", 4 << 20)
local t = setmetatable({}, {__tostring = function() return big end})
local bad = setmetatable({}, {__tostring = function() error("no") end})
while true do pcall(print, t, bad) end
