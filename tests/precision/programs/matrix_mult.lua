-- Dense matrix multiplication and a trace/checksum of the product.
local n = 110
local function matrix(seed)
  local m = {}
  for i = 1, n do
    local row = {}
    for j = 1, n do
      seed = (seed * 16807) % 2147483647
      row[j] = (seed % 1000) / 100
    end
    m[i] = row
  end
  return m
end
local function mul(a, b)
  local c = {}
  for i = 1, n do
    local ci, ai = {}, a[i]
    for j = 1, n do
      local sum = 0
      for k = 1, n do sum = sum + ai[k] * b[k][j] end
      ci[j] = sum
    end
    c[i] = ci
  end
  return c
end
local a, b = matrix(1), matrix(2)
local c = mul(a, b)
local trace, total = 0, 0
for i = 1, n do
  trace = trace + c[i][i]
  for j = 1, n do total = total + c[i][j] end
end
return string.format("trace=%.4f total=%.4f", trace, total)
