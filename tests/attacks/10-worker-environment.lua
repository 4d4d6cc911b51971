-- expect: error timeout
-- inspect: environ
-- limits: {"max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: while this loops, the test reads the worker's environment block (/proc/PID/environ, the process's own memory): nothing of the daemon's environment may be there (the daemon holds a secret), only TZ
local i = 0
while true do i = i + 1 end
