-- Shortest paths on a generated weighted graph with a binary-heap Dijkstra.
local N, E = 4000, 20000
local adj = {}
for i = 1, N do adj[i] = {} end
local s = 77
local function rnd(n) s = (s * 1103515245 + 12345) % 2147483648; return (s >> 8) % n + 1 end
for i = 1, N - 1 do table.insert(adj[i], {to = i + 1, w = rnd(100)}) end
for _ = 1, E do
  local a, b = rnd(N), rnd(N)
  table.insert(adj[a], {to = b, w = rnd(1000)})
end
local dist, heap = {}, {}
local function push(d, v)
  heap[#heap + 1] = {d, v}
  local i = #heap
  while i > 1 do
    local p = i // 2
    if heap[p][1] <= heap[i][1] then break end
    heap[p], heap[i] = heap[i], heap[p]
    i = p
  end
end
local function pop()
  local top = heap[1]
  heap[1] = heap[#heap]
  heap[#heap] = nil
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if heap[l] and heap[l][1] < heap[m][1] then m = l end
    if heap[r] and heap[r][1] < heap[m][1] then m = r end
    if m == i then break end
    heap[m], heap[i] = heap[i], heap[m]
    i = m
  end
  return top
end
dist[1] = 0
push(0, 1)
while #heap > 0 do
  local top = pop()
  local d, v = top[1], top[2]
  if d == dist[v] then
    for _, e in ipairs(adj[v]) do
      local nd = d + e.w
      if dist[e.to] == nil or nd < dist[e.to] then dist[e.to] = nd; push(nd, e.to) end
    end
  end
end
local reached, far = 0, 0
for i = 1, N do if dist[i] then reached = reached + 1; if dist[i] > far then far = dist[i] end end end
return {reached = reached, farthest = far, to_last = dist[N]}
