-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: compiling 12 MB of source takes a few hundred milliseconds for one instruction, and the source is made once; the lexer's bytes are charged, one reduction per 4, before it runs (the neighbour, loading a small chunk, runs: test_charges.py)
local s = string.rep("a = 1 ", 2000000)
while true do local f = load(s) end
