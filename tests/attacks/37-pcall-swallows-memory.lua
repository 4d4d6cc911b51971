-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- why: catch the heap limit with pcall, then loop with no instruction budget; memory_limit is sticky and uncatchable (a naive build hangs to the timeout)
local ok = pcall(function()
  local t = {}
  while true do t[#t + 1] = {} end
end)
while true do end
