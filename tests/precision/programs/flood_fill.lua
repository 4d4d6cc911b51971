-- Label connected regions of a generated grid with recursive flood fill.
local W, H = 160, 160
local grid = {}
local s = 2024
for y = 1, H do
  local row = {}
  for x = 1, W do
    s = (s * 1103515245 + 12345) % 2147483648
    row[x] = (s >> 16) % 100 < 58 and "." or "#"
  end
  grid[y] = row
end
local label = {}
for y = 1, H do label[y] = {} end
local function fill(x, y, id)
  if x < 1 or y < 1 or x > W or y > H then return 0 end
  if grid[y][x] ~= "." or label[y][x] then return 0 end
  label[y][x] = id
  return 1 + fill(x + 1, y, id) + fill(x - 1, y, id) + fill(x, y + 1, id) + fill(x, y - 1, id)
end
local regions, largest = 0, 0
for y = 1, H do
  for x = 1, W do
    if grid[y][x] == "." and not label[y][x] then
      regions = regions + 1
      local size = fill(x, y, regions)
      if size > largest then largest = size end
    end
  end
end
return {regions = regions, largest = largest}
