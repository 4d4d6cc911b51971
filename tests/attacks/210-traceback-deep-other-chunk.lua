-- expect: error runtime_error
-- message_contains: stack overflow
-- message_max_len: 8192
-- timeout_ms: 30000
-- max_wall_ms: 5000
-- why: a stack overflow half a million levels deep in a function loaded under another chunk name: the top-level error handler must not scan the whole stack for a frame of the chunk (quadratic) or measure it without bound
local g = load("local function g(n) if n == 0 then return 0 end return 1 + g(n - 1) end return g", "=other")()
return g(10000000)
