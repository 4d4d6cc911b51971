-- expect: ok
-- value: [true, false, "resulting string too large"]
-- limits: {"max_heap": 16777218}
-- why: a load reader may deliver exactly the string cap in total (one endless comment), and one byte more is the catchable error
local cap = 8388609
local function reader(total)
  local piece = string.rep("-", 1 << 20)
  local sent = 0
  return function()
    if sent >= total then return nil end
    local n = math.min(#piece, total - sent)
    sent = sent + n
    return n == #piece and piece or piece:sub(1, n)
  end
end
local f = load(reader(cap))
local g, e = load(reader(cap + 1))
return {f ~= nil, g ~= nil, (e:gsub("^.-:%d+: ", ""))}
