-- In-place quicksort (median of three, insertion sort for short runs).
local function insertion(a, lo, hi)
  for i = lo + 1, hi do
    local v, j = a[i], i - 1
    while j >= lo and a[j] > v do a[j + 1] = a[j]; j = j - 1 end
    a[j + 1] = v
  end
end
local function quicksort(a, lo, hi)
  while hi - lo > 16 do
    local mid = (lo + hi) // 2
    if a[mid] < a[lo] then a[mid], a[lo] = a[lo], a[mid] end
    if a[hi] < a[lo] then a[hi], a[lo] = a[lo], a[hi] end
    if a[hi] < a[mid] then a[hi], a[mid] = a[mid], a[hi] end
    local pivot = a[mid]
    local i, j = lo, hi
    while i <= j do
      while a[i] < pivot do i = i + 1 end
      while a[j] > pivot do j = j - 1 end
      if i <= j then a[i], a[j] = a[j], a[i]; i = i + 1; j = j - 1 end
    end
    if j - lo < hi - i then quicksort(a, lo, j); lo = i
    else quicksort(a, i, hi); hi = j end
  end
  insertion(a, lo, hi)
end
local a, s = {}, 99
for i = 1, 150000 do
  s = (s * 1103515245 + 12345) % 2147483648
  a[i] = s % 100000
end
quicksort(a, 1, #a)
local sorted = true
for i = 2, #a do if a[i - 1] > a[i] then sorted = false break end end
return {sorted = sorted, first = a[1], q1 = a[37500], last = a[#a]}
