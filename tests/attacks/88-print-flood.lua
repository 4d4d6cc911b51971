-- expect: error reductions_limit
-- limits: {"max_output_bytes": 10000, "max_reductions": 1000000}
-- timeout_ms: 5000
-- max_wall_ms: 4000
-- output_max_len: 10000
-- output_truncated: true
-- why: print 1 MB lines forever (about 200 GB in all): once max_output_bytes is reached print must stop building and sending (flagged truncated), so the loop ends by its instruction budget at once
local line = string.rep("o", 1000000)
while true do print(line) end
