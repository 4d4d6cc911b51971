-- expect: error runtime_error
-- message_contains: stack overflow
-- why: an __index function that indexes its own table recurses through C (luaT_callTM) and must hit the C-level cap, not the real C stack
local t = setmetatable({}, {})
getmetatable(t).__index = function(self, k) return self[k] end
return t.x
