-- A dictionary of 50,000 string keys: build, look up, update, delete.
local dict = {}
for i = 1, 50000 do
  dict["key:" .. i .. ":" .. (i * 2654435761 % 1000)] = i
end
local found, sum = 0, 0
for i = 1, 50000, 3 do
  local v = dict["key:" .. i .. ":" .. (i * 2654435761 % 1000)]
  if v then found = found + 1 sum = sum + v end
end
local removed = 0
for i = 2, 50000, 2 do
  local k = "key:" .. i .. ":" .. (i * 2654435761 % 1000)
  if dict[k] then dict[k] = nil removed = removed + 1 end
end
local left = 0
for _ in pairs(dict) do left = left + 1 end
return {found = found, sum = sum, removed = removed, left = left}
