-- expect: ok
-- value: ["number", true, true]
-- why: os.clock is a CLOCK_PROCESS_CPUTIME_ID syscall (never vDSO); it must work under the filter and advance
local c0 = os.clock()
local x = 0
for i = 1, 3000000 do x = x + i end
local c1 = os.clock()
return {type(c0), c1 >= c0, c1 - c0 < 60}
