-- expect: ok
-- value: ["caught", 16777216]
-- limits: {"max_heap": 33554432}
-- why: the string-cap error is catchable: catch the doubling failure with pcall and keep working with the last good string
local s = "x"
local ok = pcall(function() while true do local n = s .. s; s = n end end)
if ok then return "escaped" end
return {"caught", #s}
