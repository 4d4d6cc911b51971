-- expect: ok
-- value_contains: "from the handler"
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: parallel() runs inside an xpcall message handler and inside a coroutine.wrap, where the caller cannot yield; its branches are threads of their own, so their tool calls still go out together and come back to the right branch
local ok, e = xpcall(function() error("x") end, function(m)
  return parallel(function() return Net.get("from the handler") end)
end)
local w = coroutine.wrap(function()
  return parallel(function() return Net.get(1) end, function() return Net.get(2) end)
end)
local a, b = w()
return {ok, e, a, b}
