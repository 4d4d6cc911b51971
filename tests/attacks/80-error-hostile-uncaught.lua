-- expect: error runtime_error
-- message_contains: (error object is a thread value)
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 3000
-- why: an uncaught error object that is a coroutine whose body loops; the host must not resume or stringify it
local co = coroutine.create(function() while true do end end)
error(co)
