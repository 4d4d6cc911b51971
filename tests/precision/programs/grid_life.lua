-- Conway's game of life on a torus; each generation is a fresh grid.
local W, H = 96, 96
local grid = {}
local s = 31337
for y = 1, H do
  grid[y] = {}
  for x = 1, W do
    s = (s * 1103515245 + 12345) % 2147483648
    grid[y][x] = (s >> 16) % 4 == 0 and 1 or 0
  end
end
local function step(g)
  local n = {}
  for y = 1, H do
    local row, up, down = {}, g[(y - 2) % H + 1], g[y % H + 1]
    local cur = g[y]
    for x = 1, W do
      local l, r = (x - 2) % W + 1, x % W + 1
      local c = up[l] + up[x] + up[r] + cur[l] + cur[r] + down[l] + down[x] + down[r]
      row[x] = (c == 3 or (c == 2 and cur[x] == 1)) and 1 or 0
    end
    n[y] = row
  end
  return n
end
local history = {}
for gen = 1, 60 do
  grid = step(grid)
  local alive = 0
  for y = 1, H do for x = 1, W do alive = alive + grid[y][x] end end
  history[gen] = alive
end
return table.concat(history, ",")
