-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- why: catch the heap limit with xpcall (handler returns normally), then loop; memory_limit must end the run
local ok = xpcall(function()
  local t = {}
  while true do t[#t + 1] = {} end
end, function(m) return "handled" end)
while true do end
