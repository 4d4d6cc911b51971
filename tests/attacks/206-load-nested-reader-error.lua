-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: a load whose reader calls load with a failing reader, then fails itself: two nested parsers, both errors caught, and the budget still holds afterwards
local f, err = load(function()
  local g, e = load(function() return 42 end)
  error("outer")
end)
while true do end
