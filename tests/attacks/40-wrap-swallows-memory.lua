-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- why: exhaust the heap inside coroutine.wrap and catch the re-raised error with pcall, then loop
local ok = pcall(coroutine.wrap(function()
  local t = {}
  while true do t[#t + 1] = {} end
end))
while true do end
