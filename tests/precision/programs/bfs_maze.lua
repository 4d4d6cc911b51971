-- Carve a maze (iterative backtracker) and find the shortest path with BFS.
local W, H = 101, 101
local maze = {}
for y = 1, H do maze[y] = {} for x = 1, W do maze[y][x] = "#" end end
local s = 123
local function rnd(n) s = (s * 1103515245 + 12345) % 2147483648; return (s >> 16) % n + 1 end
local stack = {{2, 2}}
maze[2][2] = " "
local dirs = {{0, -2}, {2, 0}, {0, 2}, {-2, 0}}
while #stack > 0 do
  local cur = stack[#stack]
  local x, y = cur[1], cur[2]
  local options = {}
  for _, d in ipairs(dirs) do
    local nx, ny = x + d[1], y + d[2]
    if nx > 1 and ny > 1 and nx < W and ny < H and maze[ny][nx] == "#" then options[#options + 1] = d end
  end
  if #options == 0 then stack[#stack] = nil
  else
    local d = options[rnd(#options)]
    maze[y + d[2] // 2][x + d[1] // 2] = " "
    maze[y + d[2]][x + d[1]] = " "
    stack[#stack + 1] = {x + d[1], y + d[2]}
  end
end
local dist = {}
local queue, head = {{2, 2}}, 1
dist[2 * 1000 + 2] = 0
while head <= #queue do
  local p = queue[head]; head = head + 1
  local d = dist[p[2] * 1000 + p[1]]
  for _, dd in ipairs({{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) do
    local nx, ny = p[1] + dd[1], p[2] + dd[2]
    local key = ny * 1000 + nx
    if maze[ny][nx] == " " and dist[key] == nil then dist[key] = d + 1; queue[#queue + 1] = {nx, ny} end
  end
end
local rows = {}
for y = 1, H do rows[y] = table.concat(maze[y]) end
return {path = dist[(H - 1) * 1000 + (W - 1)], visited = #queue, render = #table.concat(rows, "\n")}
