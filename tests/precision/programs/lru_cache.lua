-- An LRU cache (hash map plus doubly linked list) under a skewed access pattern.
local LRU = {}
LRU.__index = LRU
function LRU.new(cap)
  local head, tail = {}, {}
  head.next, tail.prev = tail, head
  return setmetatable({cap = cap, size = 0, map = {}, head = head, tail = tail, hits = 0, misses = 0}, LRU)
end
local function unlink(node) node.prev.next, node.next.prev = node.next, node.prev end
function LRU:push_front(node)
  node.next, node.prev = self.head.next, self.head
  self.head.next.prev = node
  self.head.next = node
end
function LRU:get(key, load)
  local node = self.map[key]
  if node then
    self.hits = self.hits + 1
    unlink(node)
    self:push_front(node)
    return node.value
  end
  self.misses = self.misses + 1
  node = {key = key, value = load(key)}
  self.map[key] = node
  self:push_front(node)
  self.size = self.size + 1
  if self.size > self.cap then
    local old = self.tail.prev
    unlink(old)
    self.map[old.key] = nil
    self.size = self.size - 1
  end
  return node.value
end
local cache = LRU.new(2000)
local s, total = 4, 0
for _ = 1, 60000 do
  s = (s * 1103515245 + 12345) % 2147483648
  local r = (s >> 8) % 1000
  local key = r < 800 and (r % 1500) or (s >> 4) % 20000
  local v = cache:get("k" .. key, function(k) return #k * 3 + key end)
  total = total + v
end
return {hits = cache.hits, misses = cache.misses, total = total, size = cache.size}
