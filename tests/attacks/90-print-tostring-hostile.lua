-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: print calls __tostring (a Lua function inside the hooked VM); an endless one must hit the instruction budget, not hang
print(setmetatable({}, {__tostring = function() while true do end end}))
return "escaped"
