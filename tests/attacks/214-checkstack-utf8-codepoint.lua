-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: utf8.codepoint over a long slice, the same luaL_checkstack refusal as string.byte
local s = string.rep("x", 700000)
local fill = string.rep("y", 5 << 20)
local ok, e = pcall(utf8.codepoint, s, 1, -1)
return "escaped", ok, e
