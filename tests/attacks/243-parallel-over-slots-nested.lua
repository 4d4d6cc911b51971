-- expect: ok
-- value: [40, 820, 9020]
-- tools: [{"name": "Net", "functions": ["get"]}]
-- why: forty branches, more than max_parallel_calls, each with a nested parallel() of two calls, and a pcall around each call: the branches waiting for a slot get one in turn, and every answer reaches its own caller
local fs = {}
for i = 1, 40 do
  fs[i] = function()
    local a, b = parallel(function() return select(2, pcall(Net.get, i)) end,
                          function() return Net.get(i * 10) end)
    return a + b
  end
end
local r = {parallel(table.unpack(fs))}
local sum, n = 0, 0
for _, v in ipairs(r) do sum = sum + v n = n + 1 end
return {n, sum // 11, sum}
