-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: string.byte over a long slice grows the stack through luaL_checkstack ("string slice too long"); refused near the cap, it must end the run, not be caught
local s = string.rep("x", 700000)
local fill = string.rep("y", 5 << 20)
local ok, e = pcall(string.byte, s, 1, -1)
return "escaped", ok, e
