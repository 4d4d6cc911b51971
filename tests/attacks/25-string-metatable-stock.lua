-- expect: ok
-- value: [true, false, false, "escaped", "plain", "plain"]
-- why: the string metatable is stock (getmetatable("") returns it, as Lua's bwcoercion.lua needs); a chunk that poisons it (__index, __tostring, __len, __concat, __gc) changes only its own process: setmetatable still refuses strings and a __gc-carrying metatable, and the returned value and the globals left behind are read raw by C, never through the metatable
local mt = getmetatable("")
local stock = type(mt) == "table" and mt.__index == string
mt.__index = {upper = function() return "escaped" end}
mt.__tostring = function() return "poisoned" end
mt.__len = function() error("len ran") end
mt.__concat = function() error("concat ran") end
mt.__gc = function() while true do end end
local set_string = pcall(setmetatable, "", {})
local set_gc = pcall(setmetatable, {}, mt)
left_behind = "plain"
return {stock, set_string, set_gc, ("a"):upper(), "plain", left_behind}
