-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: a plain error whose xpcall handler loops forever (handlers run inside the hooked VM and must be counted)
local ok = xpcall(function() error("plain") end, function(m) while true do end end)
return "escaped"
