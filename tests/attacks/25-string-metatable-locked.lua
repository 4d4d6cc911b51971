-- expect: ok
-- value: [false, false, "A"]
-- why: poison the string metatable (its __index is every string's method table); it must be locked: getmetatable("") is false and setmetatable refuses strings
local mt = getmetatable("")
if type(mt) == "table" then
  mt.__index = {upper = function() return "escaped" end}
end
local ok = pcall(setmetatable, "", {__index = {upper = function() return "escaped" end}})
return {mt, ok, ("a"):upper()}
