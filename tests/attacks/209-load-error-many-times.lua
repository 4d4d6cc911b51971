-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 10000
-- max_wall_ms: 5000
-- why: a failing load reader in a loop, five hundred levels deep: each failure is a few instructions and must buy no top-level handler run (stack walk, traceback); the budget ends the loop
local function deep(n)
  if n > 0 then return deep(n - 1) + 0 end
  while true do load(function() error("x") end) end
end
deep(500)
