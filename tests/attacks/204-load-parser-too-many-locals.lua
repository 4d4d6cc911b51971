-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: "too many local variables" is raised by the parser as a runtime error (luaM_growvector), through the message handler of the code calling load; the budget must survive it
local f, err = load(string.rep("do local a end ", 40000))
assert(f == nil and err:find("too many local variables"), err)
while true do end
