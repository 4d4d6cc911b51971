-- Longest common subsequence with the full DP table, then the backtrace.
local function gen(n, seed, alphabet)
  local t = {}
  for i = 1, n do
    seed = (seed * 1103515245 + 12345) % 2147483648
    local k = (seed >> 16) % #alphabet + 1
    t[i] = alphabet:sub(k, k)
  end
  return table.concat(t)
end
local a, b = gen(900, 1, "ACGT"), gen(900, 2, "ACGT")
local dp = {}
for i = 0, #a do
  local row = {}
  for j = 0, #b do row[j] = 0 end
  dp[i] = row
end
for i = 1, #a do
  local ai, row, prev = a:sub(i, i), dp[i], dp[i - 1]
  for j = 1, #b do
    if ai == b:sub(j, j) then row[j] = prev[j - 1] + 1
    else
      local u, l = prev[j], row[j - 1]
      row[j] = u > l and u or l
    end
  end
end
local out, i, j = {}, #a, #b
while i > 0 and j > 0 do
  if a:sub(i, i) == b:sub(j, j) then out[#out + 1] = a:sub(i, i); i = i - 1; j = j - 1
  elseif dp[i - 1][j] >= dp[i][j - 1] then i = i - 1
  else j = j - 1 end
end
local lcs = table.concat(out):reverse()
return {length = dp[#a][#b], check = #lcs, head = lcs:sub(1, 30)}
