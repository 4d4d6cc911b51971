-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- max_wall_ms: 3000
-- why: in Lua 5.3 an integer for loop up to math.maxinteger wraps and never ends (F13); it must still be counted
for i = math.maxinteger - 1, math.maxinteger do end
return "escaped"
