-- expect: ok
-- value: {"a": [1, 2]}
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 3000
-- why: poison every shared name the host might use after the chunk (tostring, next, pairs, type, rawget, string and table functions, the _G metatable); the host runs no Lua after the chunk, and the next execution starts clean (file 98)
local loop = function() while true do end end
for _, lib in ipairs({string, table, math, coroutine, utf8, os}) do
  for k in pairs(lib) do lib[k] = loop end
end
for _, k in ipairs({"tostring", "tonumber", "next", "pairs", "ipairs", "type", "rawget", "rawset",
                    "rawlen", "rawequal", "select", "error", "assert", "getmetatable", "print",
                    "pcall", "xpcall", "load", "collectgarbage", "unpack"}) do
  _G[k] = loop
end
_G.setmetatable(_G, {__index = loop, __newindex = loop, __pairs = loop})
return {a = {1, 2}}
