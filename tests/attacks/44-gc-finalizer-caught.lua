-- expect: ok
-- value: [false, false]
-- why: try to install __gc under pcall and check whether a finalizer ever ran; the refusal is an ordinary catchable error and no finalizer may run
local ran = false
local ok = pcall(setmetatable, {}, {__gc = function() ran = true end})
for i = 1, 200000 do local t = {i} end
return {ok, ran}
