-- expect: error runtime_error
-- message_contains: global 'debug'
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 2000
-- why: remove the count hook with debug.sethook and loop; debug must not exist (a naive build loops to the timeout)
debug.sethook()
local i = 0
while true do i = i + 1 end
