-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: string.unpack with half a million items checks the stack per item ("too many results"); the refusal near the cap must be sticky
local fill = string.rep("y", 6 << 20)
local s = string.rep("a", 500000)
local ok, e = pcall(string.unpack, string.rep("b", 500000), s)
return "escaped", ok, e
