-- Fibonacci three ways: naive recursion, memoized recursion, iteration.
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local memo = {}
local function fib_memo(n)
  if n < 2 then return n end
  local v = memo[n]
  if v then return v end
  v = fib_memo(n - 1) + fib_memo(n - 2)
  memo[n] = v
  return v
end

local function fib_iter(n)
  local a, b = 0, 1
  for _ = 1, n do a, b = b, a + b end
  return a
end

local naive = fib(25)
-- a bigger memo table: tribonacci numbers modulo a prime, as strings
local trib = {[1] = "0", [2] = "0", [3] = "1"}
local function trib_at(n)
  local v = trib[n]
  if v then return v end
  v = tostring((tonumber(trib_at(n - 1)) + tonumber(trib_at(n - 2)) + tonumber(trib_at(n - 3))) % 1000000007)
  trib[n] = v
  return v
end
for n = 100, 6000, 100 do trib_at(n) end
local checks = 0
for n = 1, 90 do
  if fib_memo(n) == fib_iter(n) then checks = checks + 1 end
end
-- keep the sequence as strings, as a report would
local seq = {}
for n = 1, 90 do seq[n] = string.format("F(%d)=%d", n, fib_memo(n)) end
return {trib = trib[6000], naive = naive, checks = checks, f90 = fib_memo(90), text = #table.concat(seq, "; ")}
