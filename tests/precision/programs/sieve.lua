-- Sieve of Eratosthenes up to one million; prime gaps and twin primes.
local N = 1000000
local composite = {}
for i = 1, N do composite[i] = false end
composite[1] = true
for i = 2, math.floor(math.sqrt(N)) do
  if not composite[i] then
    for j = i * i, N, i do composite[j] = true end
  end
end
local count, twins, last, max_gap = 0, 0, nil, 0
for i = 2, N do
  if not composite[i] then
    count = count + 1
    if last then
      if i - last == 2 then twins = twins + 1 end
      if i - last > max_gap then max_gap = i - last end
    end
    last = i
  end
end
return {primes = count, twins = twins, max_gap = max_gap, largest = last}
