-- expect: error runtime_error
-- message_contains: (error object is a table value)
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 3000
-- why: an error object whose __tostring loops forever: the host reduces error objects in C without metamethods (lua.c's handler would call __tostring after the hook is gone)
error(setmetatable({}, {__tostring = function() while true do end end}))
