-- expect: ok
-- value: "not finalized"
-- why: add __gc to a metatable after setmetatable, or provide it through __index; Lua 5.3 marks objects for finalization only at setmetatable time with a raw __gc, so nothing may run
local ran = false
local mt = {}
setmetatable({}, mt)
mt.__gc = function() ran = true end
setmetatable({}, setmetatable({}, {__index = {__gc = function() ran = true end}}))
for i = 1, 200000 do local t = {i} end
return ran and "escaped: finalizer ran" or "not finalized"
