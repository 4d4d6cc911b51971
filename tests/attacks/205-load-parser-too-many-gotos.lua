-- expect: error runtime_error
-- message_contains: resulting string too large
-- limits: {"max_heap": 16777216}
-- why: "too many labels/gotos" is a parser limit raised as a runtime error inside load; the heap and string caps must survive it
local t = {}
for i = 1, 33000 do t[i] = "goto l" .. i end
local f, err = load(table.concat(t, " "))
assert(f == nil and err:find("too many labels/gotos"), err)
t = nil
return #string.rep("x", 64 << 20)
