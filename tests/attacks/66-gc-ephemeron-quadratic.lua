-- expect: error timeout
-- limits: {"max_reductions": 100000000}
-- timeout_ms: 1500
-- why: collector work outside the hook: a 100000-link key->value chain in a weak-keyed table, linked against allocation order, makes the atomic phase converge ephemerons about one link per pass (quadratic, seconds to minutes inside one allocation); only the wall clock stops it
local t = setmetatable({}, {__mode = "k"})
local keys = {}
for i = 1, 100000 do keys[i] = {} end
for i = 2, #keys do t[keys[i]] = keys[i - 1] end
local root = keys[#keys]
keys = nil
local junk
for i = 1, 1000000 do junk = {i} end
return "escaped", root ~= nil
