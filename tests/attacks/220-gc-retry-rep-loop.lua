-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 5000000}
-- timeout_ms: 20000
-- why: string.rep runs a full collection first when its result would not fit; with many live closures a loop of large reps makes a full collection per iteration (tens of milliseconds), as stock Lua's collector would at its own pace; what it allocates pays for those collections, and each 20 MiB string is charged by its bytes (327,680 reductions), so the loop ends within the budget after about a dozen of them
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
while true do local s = string.rep("x", 20 << 20) end
