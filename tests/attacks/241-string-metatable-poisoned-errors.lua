-- expect: error runtime_error
-- message_contains: (error object is a table value)
-- limits: {"max_reductions": 2000000}
-- why: with every string metamethod an endless loop, the chunk ends with an error object whose own __tostring loops too; the error message and traceback are built without metamethods, so the answer is immediate
local mt = getmetatable("")
local function spin() while true do end end
for _, k in ipairs({"__index", "__tostring", "__concat", "__len", "__eq", "__call", "__name"}) do
  mt[k] = spin
end
error(setmetatable({}, {__tostring = spin, __name = "x"}))
