-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- output_lacks: handler
-- why: the refused stack growth of table.unpack under xpcall: the user's handler must not run for it (the allocator set the limit before the ordinary error was raised)
local fill = string.rep("x", 7 << 20)
local ok, e = xpcall(table.unpack, function(m) print("handler") return m end, {}, 1, 900000)
return "escaped", ok, e
