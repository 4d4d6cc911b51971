-- Many small records kept live: t[i] = {i, ...}, then a pass over them.
local t = {}
for i = 1, 250000 do t[i] = {i, i * 2, i % 7 == 0} end
local sevens, sum = 0, 0
for i = 1, #t do
  local r = t[i]
  if r[3] then sevens = sevens + 1 end
  sum = sum + r[2] - r[1]
end
return {n = #t, sevens = sevens, sum = sum}
