-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- output_lacks: escaped
-- why: catch the reductions limit with pcall and carry on; the limit is sticky and uncatchable, and not one instruction may run after it (the hook re-arms with count 1 behind the pcall wrapper)
local caught = 0
while true do
  local ok = pcall(function() while true do end end)
  print("escaped after pcall")
  caught = caught + 1
  if caught > 3 then return "escaped" end
end
