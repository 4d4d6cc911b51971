-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: near the heap cap, table.unpack's lua_checkstack cannot grow the stack: the refused allocation is swallowed by lua_checkstack and comes back as the catchable "too many results to unpack"; it must be the sticky memory_limit
local fill = string.rep("x", 7 << 20)
local ok, e = pcall(table.unpack, {}, 1, 900000)
return "escaped", ok, e
