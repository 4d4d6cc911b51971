-- expect: error runtime_error
-- message_contains: resulting string too large
-- limits: {"max_heap": 16777216}
-- why: parser limits raised as runtime errors (too many local variables, too many labels/gotos) inside load, inside a coroutine and under pcall; afterwards the string cap still refuses a 64 MiB string
local gotos = {}
for i = 1, 33000 do gotos[i] = "goto l" .. i end
local src = table.concat(gotos, " ")
gotos = nil
coroutine.wrap(function() assert(not load(string.rep("do local a end ", 40000))) end)()
assert(pcall(load, src))
assert(select(2, load(src)):find("too many labels/gotos"))
src = nil
return #string.rep("x", 64 << 20)
