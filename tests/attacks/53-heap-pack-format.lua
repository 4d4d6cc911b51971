-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: keep string.pack and string.format results (other luaL_Buffer users) until the heap is full
local s = string.rep("p", 1000000)
local t = {}
local i = 0
while true do
  i = i + 1
  t[i] = string.pack("s4", s .. i)
  t[-i] = string.format("%s%d", s, i)
end
