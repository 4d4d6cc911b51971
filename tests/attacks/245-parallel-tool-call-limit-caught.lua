-- expect: error tool_call_limit
-- limits: {"max_tool_calls": 3}
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: five branches of parallel() under pcall, inside a pcall'd branch of another parallel(), against max_tool_calls 3: the fourth call ends the execution (the count is the supervisor's), and neither pcall nor parallel can catch it
local ok = pcall(parallel, function()
  return pcall(parallel, function() return Net.get(1) end, function() return Net.get(2) end,
               function() return Net.get(3) end, function() return Net.get(4) end,
               function() return Net.get(5) end)
end)
return "escaped", ok
