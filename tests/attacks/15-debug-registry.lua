-- expect: error runtime_error
-- message_contains: global 'debug'
-- why: walk the registry with debug.getregistry to find _LOADED and removed libraries; debug must not exist
local reg = debug.getregistry()
return "escaped: " .. tostring(reg._LOADED.io)
