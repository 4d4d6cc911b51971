-- expect: error reductions_limit
-- limits: {"max_reductions": 5000000}
-- timeout_ms: 10000
-- why: a failing load at a deep stack, in a loop: each failure is unwound by two protected calls over the whole stack, billed by its depth
local function deep(n)
  if n > 0 then return deep(n - 1) + 0 end
  while true do load(function() return {} end) end
end
deep(150000)
