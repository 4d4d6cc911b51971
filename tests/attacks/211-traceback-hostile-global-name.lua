-- expect: error runtime_error
-- message_contains: boom
-- message_max_len: 8192
-- limits: {"max_heap": 50331648}
-- why: the function that raises is stored under a 20 MiB global name; the traceback must not copy that name (the stock traceback builds "_G.<name>" strings past the heap cap), and heap_peak stays under max_heap
local name = string.rep("n", 20 << 20)
_G[name] = function() error("boom") end
local f = _G[name]
name = nil
f()
