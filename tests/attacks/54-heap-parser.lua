-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: stream an endless chunk into load through a reader; the parser's code and line arrays grow past the heap cap (Lua-managed blocks inside lua_load) and that is memory_limit
local piece = string.rep("a=1 ", 10000)
local f, err = load(function() return piece end)
return "escaped: " .. tostring(err)
