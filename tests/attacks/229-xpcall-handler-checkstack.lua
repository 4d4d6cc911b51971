-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: an xpcall handler whose table.unpack cannot grow the stack near the cap: the refusal inside the handler is the sticky limit, not an "error in error handling" that the script goes on from
local fill = string.rep("x", 7 << 20)
local ok, e = xpcall(error, function(m) return select("#", table.unpack({}, 1, 900000)) end, "x")
return "escaped", ok, e
