-- expect: ok
-- value: [0, 0, 0, 0, 0, 0, 0, "number"]
-- why: heap grooming and CPU amplification through collectgarbage (stop, step, setpause, setstepmul, collect, isrunning); only "count" may do anything
return {
  collectgarbage("stop"), collectgarbage("isrunning"), collectgarbage("setpause", 1000),
  collectgarbage("setstepmul", 1000000), collectgarbage("step", 1000000000),
  collectgarbage("restart"), collectgarbage("collect"), type(collectgarbage("count")),
}
