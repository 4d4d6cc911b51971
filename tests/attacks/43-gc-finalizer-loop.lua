-- expect: error runtime_error
-- message_contains: __gc
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 2000
-- why: a __gc finalizer runs with hooks off (F1) and at lua_close; setmetatable must refuse a metatable with __gc (a naive build hangs in the finalizer)
setmetatable({}, {__gc = function() while true do end end})
for i = 1, 100000 do local t = {i} end
return "escaped"
