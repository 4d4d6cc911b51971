-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: a gsub expansion (1 MB in, 100 MB out) grows one luaL_Buffer past the heap cap; gsub is not under the string cap, so this is memory_limit
local s = string.rep("x", 1000000)
local r = s:gsub("x", string.rep("y", 100))
return "escaped " .. #r
