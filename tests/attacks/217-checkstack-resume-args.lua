-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: 400,000 arguments passed to coroutine.resume need the coroutine's stack to grow ("too many arguments to resume" when refused); near the cap that must be the sticky limit
local fill = string.rep("y", 4 << 20)
local co = coroutine.create(function(...) return select("#", ...) end)
local ok, n = coroutine.resume(co, table.unpack({}, 1, 400000))
return "escaped", ok, n
