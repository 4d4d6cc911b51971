-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: keep distinct 1 MB strings made by the .. operator (luaV_concat, a tagged string allocation) until the heap is full
local base = string.rep("c", 1000000)
local t = {}
local i = 0
while true do i = i + 1; t[i] = base .. i end
