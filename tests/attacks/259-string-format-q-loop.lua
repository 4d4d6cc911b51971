-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: string.format("%q") escapes 4 MiB of NUL bytes one at a time (16 MiB of output) for one instruction; each byte of a %q argument is charged, one reduction per 4, before it runs (the neighbour, formatting a record, runs: test_charges.py)
local s = string.rep("\0", 4 << 20)
while true do local q = string.format("%q", s) end
