-- expect: error runtime_error
-- message_contains: global 'loadfile'
-- why: compile a host file with loadfile (and leak its text through the syntax error); loadfile must not exist
local f, err = loadfile("/etc/passwd")
return "escaped: " .. tostring(err)
