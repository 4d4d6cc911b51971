-- Closures as counters, accumulators, memoisers and composed pipelines.
local function counter(start, step)
  local n = start
  return function() n = n + step; return n end
end
local function memoize(f)
  local cache = {}
  return function(x)
    local v = cache[x]
    if v == nil then v = f(x); cache[x] = v end
    return v
  end
end
local function compose(...)
  local fns = {...}
  return function(x)
    for i = #fns, 1, -1 do x = fns[i](x) end
    return x
  end
end
local counters = {}
for i = 1, 500 do counters[i] = counter(i, i % 3 + 1) end
local total = 0
for round = 1, 100 do
  for i = 1, #counters do total = total + counters[i]() end
end
local slow_square = memoize(function(x) return x * x end)
local inc = function(x) return x + 1 end
local half = function(x) return x // 2 end
local f = compose(half, slow_square, inc)
local acc = 0
for i = 1, 60000 do acc = acc + f(i % 5000) end
return {total = total, acc = acc}
