-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- why: exhaust the heap inside a coroutine and catch it with coroutine.resume, then loop
local co = coroutine.create(function()
  local t = {}
  while true do t[#t + 1] = {} end
end)
local ok, err = coroutine.resume(co)
while true do end
