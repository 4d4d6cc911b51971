-- expect: ok
-- value: ["byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "pack", "packsize", "rep", "reverse", "sub", "unpack", "upper"]
-- why: enumerate the string library (the string metatable's __index): no dump
local keys = {}
for k in pairs(string) do keys[#keys + 1] = k end
table.sort(keys)
return keys
