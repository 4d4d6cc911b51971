-- expect: error tool_call_limit
-- limits: {"max_tool_calls": 5}
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: a runaway loop over a tool, each call wrapped in pcall and the limit's error swallowed in a coroutine too; the budget is counted by the supervisor, which ends the execution at the sixth call, so nothing in the chunk can catch it
local n = 0
for i = 1, 1000 do
  local ok = pcall(Net.get, i)
  coroutine.wrap(function() pcall(Net.get, i) end)()
  if ok then n = n + 1 end
end
return "escaped after " .. n
