-- expect: ok
-- value: [[1, 2, 3], {"a": "b"}]
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 3000
-- why: returned tables whose every metamethod loops (__index, __len, __pairs, __tostring, __newindex, __eq, __name): the result is read raw in C and no Lua runs after the chunk
local loop = function() while true do end end
local mt = {__index = loop, __len = loop, __pairs = loop, __ipairs = loop, __tostring = loop,
            __newindex = loop, __eq = loop, __name = "x", __metatable = "locked", __call = loop}
return setmetatable({1, 2, 3}, mt), setmetatable({a = "b"}, mt)
