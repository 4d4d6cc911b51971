-- Sort 30,000 generated identifiers, dedupe, and bucket by first letter.
local letters = "abcdefghijklmnopqrstuvwxyz"
local ids, s = {}, 11
for i = 1, 30000 do
  local parts = {}
  for k = 1, 6 + i % 5 do
    s = (s * 1103515245 + 12345) % 2147483648
    local c = (s >> 16) % 26 + 1
    parts[k] = letters:sub(c, c)
  end
  ids[i] = table.concat(parts)
end
table.sort(ids)
local unique, prev = {}, nil
for _, id in ipairs(ids) do
  if id ~= prev then unique[#unique + 1] = id end
  prev = id
end
local buckets = {}
for _, id in ipairs(unique) do
  local b = id:sub(1, 1)
  buckets[b] = (buckets[b] or 0) + 1
end
return {unique = #unique, first = unique[1], last = unique[#unique], a = buckets.a, z = buckets.z}
