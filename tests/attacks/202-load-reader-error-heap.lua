-- expect: error runtime_error
-- message_contains: resulting string too large
-- limits: {"max_heap": 16777216}
-- why: a load reader that raises, caught by load, must leave the heap cap and the string cap in place: a 64 MiB string afterwards is refused
local f, err = load(function() error("x") end)
return #string.rep("x", 64 << 20)
