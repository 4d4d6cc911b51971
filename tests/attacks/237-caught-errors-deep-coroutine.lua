-- expect: error reductions_limit
-- limits: {"max_reductions": 5000000}
-- timeout_ms: 10000
-- why: the same loop of caught errors at a deep stack inside a coroutine (its own stack is the deep one), with xpcall
coroutine.wrap(function()
  local function deep(n)
    if n > 0 then return deep(n - 1) + 0 end
    while true do xpcall(error, function(m) return m end, 1) end
  end
  deep(150000)
end)()
