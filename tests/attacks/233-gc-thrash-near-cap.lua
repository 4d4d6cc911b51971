-- expect: error memory_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: live data fills the heap to within 256 KiB of the cap, then a loop makes small garbage: every few thousand iterations an allocation is refused and the core runs an emergency full collection of the whole heap, which makes room for a sliver; collections that allocation does not pay for (4 bytes of collection per byte allocated) mean the heap cap is reached: memory_limit, not a full collection per few thousand instructions (the neighbour, 40 MiB live and the same garbage, completes: test_limits.py test_near_cap_verdicts)
local keep = {}
local margin = 256 * 1024
while collectgarbage("count") * 1024 < 67108864 - margin - 200000 do
  local t = {}
  for i = 1, 1000 do t[i] = function() return i end end
  keep[#keep + 1] = t
end
while true do local t = {} end
