-- expect: error runtime_error
-- message_contains: global 'debug'
-- why: fetch the unwrapped original of a sandbox wrapper (string.rep's upvalue) with debug.getupvalue, then walk debug.getregistry()._LOADED; debug must not exist
local name, orig = debug.getupvalue(string.rep, 1)
local reg = debug.getregistry()
return "escaped: " .. tostring(orig) .. tostring(reg._LOADED.io)
