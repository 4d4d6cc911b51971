-- expect: error memory_limit
-- limits: {"max_heap": 33554432, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- output_lacks: escaped
-- why: a heap refusal while a luaL_Buffer grows is an ordinary runtime error (F7) that reaches xpcall's handler; a handler that replaces the message must not turn memory_limit into a plain error
local keep = {}
for i = 1, 20 do keep[i] = string.rep(string.char(64 + i), 1000000) end
local ok, e = xpcall(function() return string.rep("y", 15000000) end, function(m) return "handled" end)
keep = nil
print("escaped", ok, e)
return "escaped"
