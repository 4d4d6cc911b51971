-- Levenshtein distances between pairs of words (two-row DP), spelling suggestions.
local function distance(s, t)
  local m, n = #s, #t
  local prev, cur = {}, {}
  for j = 0, n do prev[j] = j end
  for i = 1, m do
    cur[0] = i
    local si = s:byte(i)
    for j = 1, n do
      local cost = (si == t:byte(j)) and 0 or 1
      local a, b, c = prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost
      cur[j] = a < b and (a < c and a or c) or (b < c and b or c)
    end
    prev, cur = cur, prev
  end
  return prev[n]
end
local dictionary = {}
local syll = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu"}
for i = 1, 1200 do
  local w = {}
  local x = i
  for k = 1, 3 + i % 3 do w[k] = syll[x % #syll + 1]; x = x // #syll + k end
  dictionary[i] = table.concat(w)
end
local misspelt = {"kalomi", "nerusa", "tovize", "quka", "mineru", "sato", "lokami", "vizequ"}
local suggestions = {}
for _, word in ipairs(misspelt) do
  local best, best_d = nil, math.huge
  for _, cand in ipairs(dictionary) do
    local d = distance(word, cand)
    if d < best_d or (d == best_d and cand < best) then best, best_d = cand, d end
  end
  suggestions[#suggestions + 1] = word .. "->" .. best .. ":" .. best_d
end
return table.concat(suggestions, " ")
