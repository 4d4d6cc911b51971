-- expect: error runtime_error
-- message_contains: field 'dump'
-- why: produce bytecode with string.dump (to edit and reload, or to leak constants); string.dump must be removed
local bc = string.dump(function() return "escaped" end)
return load(bc, "=x", "b")()
