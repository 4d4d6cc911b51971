-- expect: ok
-- value: [false, "parallel: function #1 was resumed outside parallel", true, "late"]
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: a branch grabs its own thread with coroutine.running() and a sibling resumes it while it waits for a tool answer, and a branch that yielded on its own is resumed after parallel() returned; the scheduler notices instead of resuming a thread it no longer owns, and a late tool call from the stray thread blocks for its own answer
local co
local ok, err = pcall(parallel,
  function() co = coroutine.running() return Net.get(1) end,
  function() return coroutine.resume(co) end)
local saved
pcall(parallel, function() saved = coroutine.running() coroutine.yield() return Net.get("late") end)
local ok2, late = coroutine.resume(saved)
return {ok, err, ok2, late}
