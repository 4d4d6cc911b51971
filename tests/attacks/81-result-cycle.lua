-- expect: error runtime_error
-- message_contains: cycle
-- why: return a table that contains itself; the C encoder must detect the cycle (a naive one recurses until the C stack overflows)
local t = {1, 2}
t[3] = {t}
return t
