-- In-order traversal of a binary search tree with a recursive coroutine iterator.
local function insert(node, key)
  if not node then return {key = key} end
  if key < node.key then node.left = insert(node.left, key)
  elseif key > node.key then node.right = insert(node.right, key) end
  return node
end
local root, s = nil, 17
for _ = 1, 20000 do
  s = (s * 1103515245 + 12345) % 2147483648
  root = insert(root, s % 1000000)
end
local function walk(node)
  if node then
    walk(node.left)
    coroutine.yield(node.key)
    walk(node.right)
  end
end
local function keys(tree) return coroutine.wrap(function() walk(tree) end) end
local n, prev, ordered, checksum = 0, -1, true, 0
for k in keys(root) do
  n = n + 1
  if k <= prev then ordered = false end
  prev = k
  checksum = (checksum * 31 + k) % 1000000007
end
return {n = n, ordered = ordered, checksum = checksum, max = prev}
