-- A generator loop: a coroutine yields 166,668 values, consumed one resume at a time.
local function gen(n)
  return coroutine.wrap(function()
    for i = 1, n do coroutine.yield(i) end
  end)
end
local sum, count = 0, 0
for v in gen(166668) do
  sum = sum + v
  count = count + 1
end
return {sum = sum, count = count}
