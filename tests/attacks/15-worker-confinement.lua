-- expect: error timeout
-- inspect: seccomp fds
-- limits: {"max_reductions": "infinity", "cpu_ms": "infinity"}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: while this loops, the test reads the worker's /proc entry: seccomp in filter mode, no_new_privs set, and only fds 0-3 open (nothing inherited from the zygote or the daemon)
local i = 0
while true do i = i + 1 end
