-- Variadic helpers: select('#'), table.pack/unpack, argument forwarding.
local function sum(...)
  local s = 0
  for i = 1, select("#", ...) do s = s + (select(i, ...) or 0) end
  return s
end
local function forward(f, ...) return f(...) end
local function packed_max(...)
  local t = table.pack(...)
  local m = -math.huge
  for i = 1, t.n do if t[i] and t[i] > m then m = t[i] end end
  return m
end
local chunks = {}
for c = 1, 300 do
  local t = {}
  for i = 1, 40 do t[i] = (c * i) % 97 end
  chunks[c] = t
end
local total, best, nils = 0, -math.huge, 0
for round = 1, 20 do
  for _, t in ipairs(chunks) do
    total = total + forward(sum, table.unpack(t))
    local m = packed_max(table.unpack(t, 1, 20))
    if m > best then best = m end
    nils = nils + select("#", nil, nil, table.unpack(t, 39))
  end
end
return {total = total, best = best, nils = nils}
