-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: an xpcall handler (run for an ordinary error) that loops on refused concatenations: the emergency collections are billed inside a handler too
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
local s = string.rep("x", (16 << 20) + 64)
xpcall(error, function(m)
  while true do pcall(function() return s .. s end) end
end, "x")
return "escaped"
