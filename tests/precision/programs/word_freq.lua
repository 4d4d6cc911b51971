-- Word frequencies of a generated text: lowercase, count, top 20.
local vocab = {}
for w in ("The quick brown fox jumps over the lazy dog while a curious cat watches from " ..
  "the window and the rain keeps falling on the old stone bridge near the river bank " ..
  "where children play games and elders tell stories about ancient kings and queens"):gmatch("%a+") do
  vocab[#vocab + 1] = w
end
local seed = 99
local words = {}
for i = 1, 60000 do
  seed = (seed * 214013 + 2531011) % 4294967296
  local w = vocab[(seed >> 16) % #vocab + 1]
  if i % 17 == 0 then w = w:upper() end
  words[i] = w
  if i % 12 == 0 then words[i] = w .. "." end
end
local text = table.concat(words, " ")

local counts = {}
for word in text:gmatch("%a+") do
  local w = word:lower()
  counts[w] = (counts[w] or 0) + 1
end
local list = {}
for w, n in pairs(counts) do list[#list + 1] = {word = w, n = n} end
table.sort(list, function(a, b) if a.n ~= b.n then return a.n > b.n end return a.word < b.word end)
local top = {}
for i = 1, 20 do top[i] = list[i].word .. "=" .. list[i].n end
return table.concat(top, ",")
