-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: keep string.rep results (each well under the string cap) until the heap is full: a luaL_Buffer refusal is a plain runtime error in Lua (F7) and must still be memory_limit
local t = {}
local i = 0
while true do i = i + 1; t[i] = string.rep(string.char(i % 256), 3000000) end
