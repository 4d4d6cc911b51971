-- expect: ok
-- value: ["nil", "function", "thread", "boolean", "table"]
-- why: error objects of every odd type, each with hostile metamethods where possible, caught and inspected in Lua: nothing runs, nothing crashes
local loop = function() while true do end end
local hostile = setmetatable({}, {__index = loop, __tostring = loop, __name = "string",
  __len = loop, __concat = loop, __eq = loop, __call = loop, __pairs = loop})
local r = {}
for _, v in ipairs({{nil}, {print}, {coroutine.create(print)}, {false}, {hostile}}) do
  local ok, e = pcall(error, v[1])
  r[#r + 1] = type(e)
end
return r
