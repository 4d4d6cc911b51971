-- expect: ok
-- value: [false, "C stack overflow"]
-- why: CVE-2021-43519: coroutines resuming coroutines without end (each a nested lua_resume on the C stack); capped at 200 levels with an ordinary error
local function f() return coroutine.wrap(f)() end
local ok, e = pcall(f)
return {ok, e:sub(-16)}
