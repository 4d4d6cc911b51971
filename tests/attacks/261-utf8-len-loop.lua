-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: utf8.len decodes 9 MiB character by character (tens of milliseconds) for one instruction; each byte it decodes is charged, one reduction per 4, before it runs (the neighbour, utf8.len of a line, runs: test_charges.py)
local s = string.rep("\u{4e16}", 3 << 20)
while true do local n = utf8.len(s) end
