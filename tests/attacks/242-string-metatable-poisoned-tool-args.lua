-- expect: ok
-- value: ["s", {"k": "v"}, "p"]
-- tools: [{"name": "Net", "functions": ["get"]}]
-- limits: {"max_reductions": 2000000}
-- why: tool arguments and answers (strings, string-keyed tables) pass through the codec with every string metamethod an endless loop; they are encoded and decoded raw, also under parallel()
local mt = getmetatable("")
local function spin() while true do end end
for _, k in ipairs({"__index", "__tostring", "__concat", "__len", "__eq", "__call", "__name"}) do
  mt[k] = spin
end
local p = parallel(function() return Net.get("p") end)
return {Net.get("s"), Net.get({k = "v"}), p}
