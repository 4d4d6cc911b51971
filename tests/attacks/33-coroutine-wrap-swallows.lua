-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: coroutine.wrap re-raises with a position prefix (F5); catching that with pcall must not reset the limit
for i = 1, 10 do
  pcall(coroutine.wrap(function() while true do end end))
end
return "escaped"
