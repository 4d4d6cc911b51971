-- expect: ok
-- value: [false, "resulting string too large", 1000000]
-- limits: {"max_heap": 33554432}
-- why: string.rep("x", 2^40) would pass Lua's own 2 GiB check at smaller sizes (F9); the sandbox cap refuses it with a catchable error, and the run goes on
local ok, e = pcall(string.rep, "x", 1 << 40)
return {ok, (e:gsub("^.-:%d+: ", "")), #string.rep("x", 1000000)}
