-- expect: ok
-- value: ["nil", "nil", "nil"]
-- why: dofile() with no argument reads stdin (the protocol stream in a naive worker) and loadfile compiles host files (leaking text through syntax errors); neither may exist, not even in _ENV of a loaded chunk
local r = {type(rawget(_G, "dofile")), type(rawget(_G, "loadfile")), type(load("return dofile or loadfile")())}
if r[1] ~= "nil" then return "escaped: " .. tostring(dofile()) end
return r
