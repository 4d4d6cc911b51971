-- expect: ok
-- value: "contained"
-- why: reach dump through the string metatable (a method on a string value) or a copy of the string table; it must be gone from the real table
local s = "x"
if s.dump ~= nil or ("").dump ~= nil then return "escaped: dump via string method" end
local mt = getmetatable("")
if type(mt) == "table" and type(mt.__index) == "table" and mt.__index.dump then
  return "escaped: dump via the string metatable"
end
return "contained"
