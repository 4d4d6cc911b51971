-- Collatz chain lengths with a memo table: the longest chain below 200,000.
local memo = {[1] = 1}
local function chain(n)
  local v = memo[n]
  if v then return v end
  local nxt = (n % 2 == 0) and n // 2 or 3 * n + 1
  v = chain(nxt) + 1
  memo[n] = v
  return v
end
local best, best_n = 0, 0
for n = 1, 200000 do
  local l = chain(n)
  if l > best then best, best_n = l, n end
end
local entries = 0
for _ in pairs(memo) do entries = entries + 1 end
return {longest = best, start = best_n, memo = entries}
