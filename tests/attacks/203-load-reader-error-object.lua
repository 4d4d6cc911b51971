-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 5000
-- why: a reader raising a table (no message text) and one raising nil: load catches both, and the heap cap still stops the table growth that follows
local f, err = load(function() error({}) end)
local g, err2 = load(function() error() end)
local t = {}
while true do t[#t + 1] = {} end
