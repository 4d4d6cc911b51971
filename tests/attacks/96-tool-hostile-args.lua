-- expect: ok
-- value: [false, "table cycle", [1, 2], "nil", "\ufffd"]
-- tools: [{"name": "Echo", "functions": ["back"]}]
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 5000
-- why: pass hostile values to a tool: a cyclic table (a clear, catchable error), a table whose metamethods loop (read raw), NaN and invalid UTF-8 (substitutes); the echo comes back without running Lua in the host
local loop = function() while true do end end
local cyc = {}
cyc.self = cyc
local ok, e = pcall(Echo.back, cyc)
local raw = Echo.back(setmetatable({1, 2}, {__index = loop, __len = loop, __pairs = loop}))
return {ok, e:match("table cycle"), raw, tostring(Echo.back(0/0)), Echo.back("\xff")}
