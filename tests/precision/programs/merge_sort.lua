-- A textbook top-down merge sort that slices arrays (lots of garbage).
local function merge(left, right)
  local out, i, j = {}, 1, 1
  while i <= #left and j <= #right do
    if left[i] <= right[j] then out[#out + 1] = left[i]; i = i + 1
    else out[#out + 1] = right[j]; j = j + 1 end
  end
  while i <= #left do out[#out + 1] = left[i]; i = i + 1 end
  while j <= #right do out[#out + 1] = right[j]; j = j + 1 end
  return out
end
local function merge_sort(arr)
  if #arr <= 1 then return arr end
  local mid = #arr // 2
  local left, right = {}, {}
  for i = 1, mid do left[i] = arr[i] end
  for i = mid + 1, #arr do right[i - mid] = arr[i] end
  return merge(merge_sort(left), merge_sort(right))
end
local data, s = {}, 7
for i = 1, 30000 do
  s = (s * 69069 + 1) % 4294967296
  data[i] = s % 1000000
end
local sorted = merge_sort(data)
local ok = true
for i = 2, #sorted do if sorted[i - 1] > sorted[i] then ok = false end end
return {ok = ok, n = #sorted, min = sorted[1], median = sorted[15000], max = sorted[#sorted]}
