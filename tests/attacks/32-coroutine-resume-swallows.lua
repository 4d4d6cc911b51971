-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: run the loop inside coroutines and catch the limit with coroutine.resume, over and over
local n = 0
while true do
  local co = coroutine.create(function() while true do end end)
  local ok, err = coroutine.resume(co)
  n = n + 1
  if n > 3 then return "escaped", err end
end
