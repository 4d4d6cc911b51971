-- expect: ok
-- value_contains: C levels
-- why: 5000 nested function bodies through load (each a parser recursion and a new prototype); capped with an error, no overflow
local src = string.rep("return function() ", 5000) .. "return 1" .. string.rep(" end", 5000)
local f, err = load(src)
if f then return "escaped: parsed" end
return err
