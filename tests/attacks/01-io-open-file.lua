-- expect: error runtime_error
-- message_contains: global 'io'
-- why: read a host file through io.open; the io library must not exist
return "escaped: " .. io.open("/etc/passwd", "r"):read("a")
