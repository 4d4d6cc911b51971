-- expect: ok
-- value: "inspected"
-- inspect: environ
-- limits: {"max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 120000
-- why: while this loops, the test reads the worker's environment block (/proc/PID/environ, the process's own memory): nothing of the daemon's environment may be there (the daemon holds a secret), only TZ; it loops until the test has looked (Inspect.seen), however long that takes on a loaded machine
local i = 0
repeat
  for _ = 1, 100000 do i = i + 1 end
until Inspect.seen()
return "inspected"
