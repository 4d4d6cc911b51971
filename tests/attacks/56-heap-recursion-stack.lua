-- expect: error memory_limit
-- limits: {"max_heap": 8388608}
-- why: unbounded Lua recursion grows the Lua stack and CallInfo list (about 16 MiB before "stack overflow", F12); under an 8 MiB cap that is memory_limit
local function f(n) return 1 + f(n + 1) end
return f(1)
