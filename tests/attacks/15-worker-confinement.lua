-- expect: ok
-- value: "inspected"
-- inspect: seccomp fds
-- limits: {"max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 120000
-- why: while this loops, the test reads the worker's /proc entry: seccomp in filter mode, no_new_privs set, and only fds 0-3 open (nothing inherited from the zygote or the daemon); it loops until the test has looked (Inspect.seen), however long that takes on a loaded machine
local i = 0
repeat
  for _ = 1, 100000 do i = i + 1 end
until Inspect.seen()
return "inspected"
