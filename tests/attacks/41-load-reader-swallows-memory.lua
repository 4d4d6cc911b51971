-- expect: error memory_limit
-- limits: {"max_heap": 16777216, "max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 20000
-- why: exhaust the heap inside a load reader (run in protected mode by lua_load), then loop
local t = {}
local f, err = load(function()
  while true do t[#t + 1] = {} end
end)
t = nil
while true do end
