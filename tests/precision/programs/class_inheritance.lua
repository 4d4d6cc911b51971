-- A class hierarchy via __index chains: shapes with overridden methods.
local function class(parent)
  local c = {}
  c.__index = c
  if parent then setmetatable(c, {__index = parent}) end
  c.new = function(...)
    local o = setmetatable({}, c)
    if o.init then o:init(...) end
    return o
  end
  return c
end
local Shape = class()
function Shape:init(name) self.name = name end
function Shape:area() return 0 end
function Shape:describe() return string.format("%s with area %.2f", self.name, self:area()) end
local Rect = class(Shape)
function Rect:init(w, h) Shape.init(self, "rect"); self.w, self.h = w, h end
function Rect:area() return self.w * self.h end
local Square = class(Rect)
function Square:init(s) Rect.init(self, s, s); self.name = "square" end
local Circle = class(Shape)
function Circle:init(r) Shape.init(self, "circle"); self.r = r end
function Circle:area() return math.pi * self.r * self.r end
local shapes = {}
for i = 1, 20000 do
  local k = i % 3
  if k == 0 then shapes[i] = Rect.new(i % 10 + 1, i % 7 + 1)
  elseif k == 1 then shapes[i] = Square.new(i % 9 + 1)
  else shapes[i] = Circle.new((i % 5 + 1) / 2) end
end
local total, counts, descr = 0, {}, {}
for i, s in ipairs(shapes) do
  total = total + s:area()
  counts[s.name] = (counts[s.name] or 0) + 1
  if i % 2000 == 0 then descr[#descr + 1] = s:describe() end
end
return {total = string.format("%.3f", total), rects = counts.rect, squares = counts.square,
        circles = counts.circle, sample = descr[3]}
