-- Keep the top 100 of 200,000 scores with a binary min-heap.
local Heap = {}
Heap.__index = Heap
function Heap.new() return setmetatable({n = 0}, Heap) end
function Heap:push(v)
  self.n = self.n + 1
  local i = self.n
  self[i] = v
  while i > 1 do
    local p = i // 2
    if self[p] <= self[i] then break end
    self[p], self[i] = self[i], self[p]
    i = p
  end
end
function Heap:pop()
  local top = self[1]
  self[1] = self[self.n]
  self[self.n] = nil
  self.n = self.n - 1
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= self.n and self[l] < self[m] then m = l end
    if r <= self.n and self[r] < self[m] then m = r end
    if m == i then break end
    self[m], self[i] = self[i], self[m]
    i = m
  end
  return top
end
local h = Heap.new()
local s = 5
local all = {}
for i = 1, 200000 do
  s = (s * 1103515245 + 12345) % 2147483648
  local score = s % 1000003
  all[i] = score
  if h.n < 100 then h:push(score)
  elseif score > h[1] then h:pop(); h:push(score) end
end
local top = {}
while h.n > 0 do top[#top + 1] = h:pop() end
return {count = #top, smallest_kept = top[1], best = top[#top], seen = #all}
