-- 0/1 knapsack by dynamic programming with item reconstruction.
local items, s = {}, 3
for i = 1, 120 do
  s = (s * 1103515245 + 12345) % 2147483648
  items[i] = {weight = 5 + (s >> 8) % 60, value = 10 + (s >> 4) % 200, name = "item" .. i}
end
local capacity = 2500
local best = {}
local keep = {}
for w = 0, capacity do best[w] = 0 end
for i, it in ipairs(items) do
  local k = {}
  for w = capacity, it.weight, -1 do
    local with = best[w - it.weight] + it.value
    if with > best[w] then best[w] = with; k[w] = true end
  end
  keep[i] = k
end
local chosen, w = {}, capacity
for i = #items, 1, -1 do
  if keep[i][w] then chosen[#chosen + 1] = items[i].name; w = w - items[i].weight end
end
table.sort(chosen)
return {value = best[capacity], count = #chosen, first = chosen[1], weight_left = w}
