-- expect: error memory_limit
-- limits: {"max_heap": 33554432}
-- why: allocate threads (each with its own stack) and closures with upvalues until the cap; memory_limit
local t = {}
local i = 0
while true do
  i = i + 1
  t[i] = coroutine.create(function() return i end)
  t[-i] = function() return t, i end
end
