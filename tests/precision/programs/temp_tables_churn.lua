-- Geometry with short-lived tables: many small points and segments, little kept.
local function point(x, y) return {x = x, y = y} end
local function midpoint(a, b) return point((a.x + b.x) / 2, (a.y + b.y) / 2) end
local function dist(a, b) return math.sqrt((a.x - b.x) ^ 2 + (a.y - b.y) ^ 2) end
local total, hull = 0, {}
for i = 1, 60000 do
  local a, b = point(i % 100, i % 37), point(i % 53, i % 91)
  local m = midpoint(a, b)
  local seg = {from = a, to = b, mid = m, len = dist(a, b)}
  total = total + seg.len
  if i % 1000 == 0 then hull[#hull + 1] = seg.mid end
end
return {total = string.format("%.4f", total), kept = #hull}
