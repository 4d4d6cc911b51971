-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: grow a hash part with distinct string keys (string interning and node vectors); memory_limit
local t = {}
local i = 0
while true do i = i + 1; t["key" .. i] = i end
