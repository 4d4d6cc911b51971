-- expect: error timeout
-- limits: {"max_reductions": 100000000}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: table.move over an empty table with a 2^62 range moves nils forever in constant memory with no VM instruction (F10); the wall clock must stop it
table.move({}, 1, 1 << 62, 2)
return "escaped"
