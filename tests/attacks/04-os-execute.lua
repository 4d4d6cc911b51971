-- expect: error runtime_error
-- message_contains: field 'execute'
-- why: run a command with os.execute; only os.time/clock/date/difftime may exist
return "escaped: " .. tostring(os.execute("touch /tmp/sandboxd-escaped"))
