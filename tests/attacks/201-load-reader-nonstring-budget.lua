-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- why: a load reader that returns a table raises inside lua_load, which runs under the caller's message handler; that error must not reach the chunk's top-level handler (which ends the run) and lift the budget: the loop after it must still be stopped
local f, err = load(function() return {} end)
while true do end
