-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: grow one table's array part until the heap cap (one large realloc at a time); memory_limit, never a crash or a host OOM
local t = {}
local i = 0
while true do i = i + 1; t[i] = i end
