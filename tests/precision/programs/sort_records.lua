-- Sort 40,000 records by several keys with a comparator, then page through them.
local cities = {"Berlin", "Cairo", "Delhi", "Lagos", "Madrid", "Manila", "Paris", "Seoul", "Tokyo", "Toronto"}
local recs = {}
local s = 42
for i = 1, 40000 do
  s = (s * 1103515245 + 12345) % 2147483648
  recs[i] = {id = i, city = cities[s % #cities + 1], age = 18 + (s >> 8) % 60,
             score = ((s >> 4) % 10000) / 100, name = string.format("p%05d", (s >> 3) % 100000)}
end
table.sort(recs, function(a, b)
  if a.city ~= b.city then return a.city < b.city end
  if a.age ~= b.age then return a.age > b.age end
  if a.score ~= b.score then return a.score > b.score end
  return a.id < b.id
end)
local pages = {}
for p = 0, 9 do
  local r = recs[p * 4000 + 1]
  pages[#pages + 1] = string.format("%s/%d/%.2f/%d", r.city, r.age, r.score, r.id)
end
return table.concat(pages, " ")
