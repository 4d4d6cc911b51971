-- expect: ok
-- value: "contained"
-- why: look for io (and its file handles) through _ENV, rawget, package.loaded and the registry-like tables a naive sandbox leaves around
local found = {}
local function check(where, v) if v ~= nil then found[#found + 1] = where end end
check("rawget(_G)", rawget(_G, "io"))
check("_ENV", _ENV.io)
check("package.loaded", type(package) == "table" and package.loaded and package.loaded.io or nil)
check("_LOADED", rawget(_G, "_LOADED"))
check("io.stdout", rawget(_G, "stdout"))
check("load env", load("return io")())
if #found > 0 then return "escaped: " .. table.concat(found, ", ") end
return "contained"
