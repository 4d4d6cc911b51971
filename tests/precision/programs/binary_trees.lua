-- The benchmark-game binary trees: allocate, check and discard many trees.
local function bottom_up(depth)
  if depth == 0 then return {} end
  depth = depth - 1
  return {bottom_up(depth), bottom_up(depth)}
end

local function check(tree)
  if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
  return 1
end

local max_depth = 13
local long_lived = bottom_up(max_depth)
local lines = {}
for depth = 4, max_depth, 2 do
  local iterations = 2 ^ (max_depth - depth + 4) // 1
  local total = 0
  for _ = 1, iterations do total = total + check(bottom_up(depth)) end
  lines[#lines + 1] = string.format("%d trees of depth %d check: %d", iterations, depth, total)
end
lines[#lines + 1] = "long lived tree check: " .. check(long_lived)
return table.concat(lines, "\n")
