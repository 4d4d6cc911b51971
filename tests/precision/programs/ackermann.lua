-- Ackermann's function for small arguments (deep, non-tail recursion).
local calls = 0
local function ack(m, n)
  calls = calls + 1
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
local results = {}
for n = 0, 6 do results[#results + 1] = ack(2, n) end
results[#results + 1] = ack(3, 5)
results[#results + 1] = ack(3, 7)
return {values = table.concat(results, ","), calls = calls}
