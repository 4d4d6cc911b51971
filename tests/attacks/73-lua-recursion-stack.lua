-- expect: error runtime_error
-- message_contains: stack overflow
-- limits: {"max_heap": 134217728}
-- why: unbounded Lua recursion under a heap large enough for the 1M-slot Lua stack: an ordinary "stack overflow" error, and the message handler still produces a result
local function f(n) return 1 + f(n + 1) end
return f(1)
