-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: table.insert at position 1 moves every element up one, and a __len metamethod makes an empty table ten million long: each call moves ten million values in C for one instruction; the values moved are charged before it runs (the neighbour, inserting at the front of a short list, runs: test_charges.py)
local t = setmetatable({}, {__len = function() return 10000000 end})
while true do table.insert(t, 1, 0) end
