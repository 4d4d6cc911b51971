-- expect: error memory_limit
-- limits: {"max_heap": 16000000}
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: a branch of parallel() exceeds the heap while its siblings wait for tool answers, all under pcall; the limit stays fatal: parallel() rethrows it and no branch, pcall or sibling can catch it
local hog = {}
local ok = pcall(parallel,
  function() return Net.get(1) end,
  function() for i = 1, 1e9 do hog[i] = {i} end end,
  function() return pcall(Net.get, 2) end)
return "escaped", ok
