-- UTF-8 processing: build multilingual text, count code points, reverse by characters.
local samples = {"héllo", "wörld", "naïve", "日本語", "Ελληνικά", "русский", "عربى", "emoji😀", "ascii"}
local parts = {}
for i = 1, 20000 do parts[i] = samples[i % #samples + 1] end
local text = table.concat(parts, " ")
local chars = utf8.len(text)
local max_cp, wide = 0, 0
for _, cp in utf8.codes(text) do
  if cp > max_cp then max_cp = cp end
  if cp > 0x7ff then wide = wide + 1 end
end
local reversed_words = {}
for word in text:gmatch("%S+") do
  local cps = {}
  for _, cp in utf8.codes(word) do table.insert(cps, 1, cp) end
  reversed_words[#reversed_words + 1] = utf8.char(table.unpack(cps))
end
local rev = table.concat(reversed_words, " ")
return {bytes = #text, chars = chars, max_cp = max_cp, wide = wide, rev_chars = utf8.len(rev),
        sample = reversed_words[4]}
