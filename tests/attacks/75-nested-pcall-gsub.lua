-- expect: ok
-- value: ["done", false]
-- why: unbounded nesting of pcall and of gsub callbacks (C -> Lua -> C); the C-level cap raises an error that the innermost pcall catches, and the chunk goes on
local function f() pcall(f) end
f()
local function g(s) return (s:gsub(".", g)) end
local ok = pcall(g, "abc")
return {"done", ok}
