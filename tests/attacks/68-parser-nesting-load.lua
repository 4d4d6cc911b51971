-- expect: ok
-- value_contains: C levels
-- why: 100000 nested parentheses given to load: the parser's recursion is capped (LUAI_MAXCCALLS) and load returns nil, msg instead of overflowing the C stack
local src = "return " .. string.rep("(", 100000) .. "1" .. string.rep(")", 100000)
local f, err = load(src)
if f then return "escaped: parsed" end
return err
