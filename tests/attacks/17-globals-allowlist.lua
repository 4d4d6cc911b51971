-- expect: ok
-- value: ["_G", "_VERSION", "assert", "collectgarbage", "coroutine", "error", "getmetatable", "ipairs", "load", "math", "next", "os", "pairs", "parallel", "pcall", "print", "rawequal", "rawget", "rawlen", "rawset", "select", "setmetatable", "string", "table", "tonumber", "tostring", "type", "unpack", "utf8", "xpcall"]
-- why: enumerate the globals: exactly the allowlist, nothing a naive environment adds (io, debug, package, require, dofile, loadfile)
local keys = {}
for k in pairs(_G) do keys[#keys + 1] = k end
table.sort(keys)
return keys
