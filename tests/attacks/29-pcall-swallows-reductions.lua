-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: catch the reductions limit with pcall and carry on; the limit is sticky and uncatchable
local caught = 0
while true do
  local ok = pcall(function() while true do end end)
  caught = caught + 1
  if caught > 3 then return "escaped" end
end
