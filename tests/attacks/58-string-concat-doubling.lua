-- expect: error runtime_error
-- message_contains: resulting string too large
-- limits: {"max_heap": 33554432}
-- why: double a string with .. until it passes half the heap; the string cap raises the catchable "resulting string too large" (uncaught here), not memory_limit or a crash
local s = "x"
while true do s = s .. s end
