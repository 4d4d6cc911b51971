-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: a load reader whose table.unpack is refused near the cap: load catches the "too many results" error, and must still end the run with the sticky limit
local fill = string.rep("x", 7 << 20)
local f, e = load(function() return select("#", table.unpack({}, 1, 900000)) and nil end)
return "escaped", f, e
