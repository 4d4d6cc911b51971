-- expect: ok
-- value: [false, "resulting string too large"]
-- limits: {"max_heap": 33554432}
-- timeout_ms: 10000
-- why: a load reader that never ends (one endless comment line, so the lexer keeps nothing): the pieces count against the string cap in total and load fails with the catchable string error
local piece = string.rep("x", 1000000)
local first = true
local f, err = load(function()
  if first then first = false return "--" end
  return piece
end)
return {f ~= nil, (tostring(err):gsub("^.-:%d+: ", ""))}
