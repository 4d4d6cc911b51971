-- expect: error runtime_error
-- message_contains: global 'package'
-- why: CVE-2022-0543: package.loadlib of luaopen_io from the system liblua5.3 gives io back; package must not exist
local open = package.loadlib("/usr/lib/x86_64-linux-gnu/liblua5.3.so.0", "luaopen_io")
local io = open()
return "escaped: " .. io.popen("id"):read("a")
