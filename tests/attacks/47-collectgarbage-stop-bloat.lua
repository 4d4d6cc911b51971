-- expect: ok
-- value: 400000000
-- limits: {"max_heap": 33554432}
-- why: stop the collector, then make 400 MB of garbage through string.rep buffers (no emergency GC for buffers, F7); the collector must keep running so this fits in 32 MiB
collectgarbage("stop")
collectgarbage("setpause", 100000)
local n = 0
for i = 1, 400 do
  local s = string.rep("z", 1000000)
  n = n + #s
end
return n
