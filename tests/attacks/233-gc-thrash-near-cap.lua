-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: live data fills the heap to within 256 KiB of the cap, then a loop makes small garbage: every few hundred iterations an allocation is refused and the core runs an emergency full collection of the whole heap (which then succeeds); those collections must be billed
local keep = {}
local margin = 256 * 1024
while collectgarbage("count") * 1024 < 67108864 - margin - 200000 do
  local t = {}
  for i = 1, 1000 do t[i] = function() return i end end
  keep[#keep + 1] = t
end
while true do local t = {} end
