-- expect: ok
-- value: ["str", {"a": "x", "b": {"c": "z"}, "1": "y"}, 3]
-- limits: {"max_reductions": 2000000}
-- why: every metamethod of the string metatable is an endless loop (and __metatable hides it) before the chunk returns strings, string-keyed tables and globals; results and bindings are read raw after the limits are lifted, so no Lua runs there and the chunk ends at once
local mt = getmetatable("")
local function spin() while true do end end
for _, k in ipairs({"__index", "__newindex", "__tostring", "__concat", "__len", "__eq", "__lt",
                    "__le", "__call", "__name", "__pairs", "__unm", "__add", "__mode"}) do
  mt[k] = spin
end
mt.__metatable = "locked"
s = "a global string"
t = {k = "v"}
return "str", {a = "x", [1] = "y", b = {c = "z"}}, #"abc"
