-- Arbitrary-precision factorial in base 10^7 limbs; digit sum and length of 1000!.
local BASE = 10000000
local function mul_small(a, m)
  local carry = 0
  for i = 1, #a do
    local v = a[i] * m + carry
    a[i] = v % BASE
    carry = v // BASE
  end
  while carry > 0 do a[#a + 1] = carry % BASE; carry = carry // BASE end
end
local function tostr(a)
  local parts = {tostring(a[#a])}
  for i = #a - 1, 1, -1 do parts[#parts + 1] = string.format("%07d", a[i]) end
  return table.concat(parts)
end
local results = {}
local f = {1}
for n = 1, 1000 do
  mul_small(f, n)
  if n % 100 == 0 then results[#results + 1] = tostr(f) end
end
local s = results[#results]
local digit_sum = 0
for d in s:gmatch("%d") do digit_sum = digit_sum + tonumber(d) end
return {digits = #s, digit_sum = digit_sum, head = s:sub(1, 20), kept = #results}
