-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: an xpcall handler that itself raises and loops in nested xpcalls; every level must be counted and none may swallow the limit
local function h(m)
  return select(2, xpcall(function() while true do end end, h))
end
for i = 1, 5 do xpcall(function() error("x") end, h) end
return "escaped"
