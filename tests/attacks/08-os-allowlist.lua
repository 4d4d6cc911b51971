-- expect: ok
-- value: ["clock", "date", "difftime", "time"]
-- why: enumerate the os table: exactly the four time functions, nothing else
local keys = {}
for k in pairs(os) do keys[#keys + 1] = k end
table.sort(keys)
return keys
