-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: an xpcall handler that calls load with failing readers; the handler's own error handling and load's must leave the budget in place
local ok = xpcall(function() error("a") end, function(m)
  load(function() return {} end)
  load(function() error("b") end)
  return m
end)
while true do end
