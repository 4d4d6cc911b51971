-- Lazy iterator combinators (map, filter, take, zip) built from closures.
local function range(n)
  local i = 0
  return function() i = i + 1; if i <= n then return i end end
end
local function map(f, it) return function() local v = it(); if v ~= nil then return f(v) end end end
local function filter(p, it)
  return function()
    while true do
      local v = it()
      if v == nil or p(v) then return v end
    end
  end
end
local function take(n, it)
  local k = 0
  return function() k = k + 1; if k <= n then return it() end end
end
local function collect(it)
  local out = {}
  for v in it do out[#out + 1] = v end
  return out
end
local squares = collect(take(5000, filter(function(x) return x % 3 == 0 end,
  map(function(x) return x * x end, range(200000)))))
local strs = collect(map(function(x) return "#" .. x end, take(20000, range(1e9))))
local sum = 0
for v in map(function(x) return x * 2 end, range(100000)) do sum = sum + v end
return {squares = #squares, last_square = squares[#squares], strs = #strs, sample = strs[12345], sum = sum}
