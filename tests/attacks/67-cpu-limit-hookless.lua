-- expect: error cpu_limit
-- limits: {"cpu_ms": 500, "max_reductions": "infinity"}
-- timeout_ms: 15000
-- why: a hook-free C loop (table.move of nils) against a CPU budget: cpu_limit must fire from outside the VM (supervisor CPU clock, RLIMIT_CPU)
table.move({}, 1, 1 << 62, 2)
return "escaped"
