-- expect: error runtime_error
-- message_contains: global 'io'
-- why: run a shell command through io.popen; the io library must not exist
return "escaped: " .. io.popen("id"):read("a")
