-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- output_lacks: after
-- why: coroutine.resume reports a refused stack growth for the coroutine's results as false, "too many results to resume", without raising; the chunk must not run on from there (print, tool calls) until it ends
local fill = string.rep("y", 5 << 20)
local co = coroutine.create(function() return table.unpack({}, 1, 400000) end)
local ok, e = coroutine.resume(co)
print("after", ok, e)
return "escaped"
