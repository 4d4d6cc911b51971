-- A 3-D vector class with arithmetic metamethods: a particle simulation.
local Vec = {}
Vec.__index = Vec
local function vec(x, y, z) return setmetatable({x = x, y = y, z = z}, Vec) end
Vec.__add = function(a, b) return vec(a.x + b.x, a.y + b.y, a.z + b.z) end
Vec.__sub = function(a, b) return vec(a.x - b.x, a.y - b.y, a.z - b.z) end
Vec.__mul = function(a, k) return vec(a.x * k, a.y * k, a.z * k) end
Vec.__eq = function(a, b) return a.x == b.x and a.y == b.y and a.z == b.z end
Vec.__tostring = function(a) return string.format("(%.3f, %.3f, %.3f)", a.x, a.y, a.z) end
function Vec:length() return math.sqrt(self.x * self.x + self.y * self.y + self.z * self.z) end
local particles = {}
for i = 1, 300 do
  particles[i] = {pos = vec(i % 17, i % 23, i % 29), vel = vec((i % 5) - 2, (i % 7) - 3, 1)}
end
local gravity, dt = vec(0, 0, -9.81), 0.01
for step = 1, 100 do
  for _, p in ipairs(particles) do
    p.vel = p.vel + gravity * dt
    p.pos = p.pos + p.vel * dt
    if p.pos.z < 0 then p.pos = vec(p.pos.x, p.pos.y, -p.pos.z); p.vel = vec(p.vel.x, p.vel.y, -p.vel.z * 0.9) end
  end
end
local far, centre = 0, vec(0, 0, 0)
for _, p in ipairs(particles) do
  centre = centre + p.pos * (1 / #particles)
  local d = p.pos:length()
  if d > far then far = d end
end
return {centre = tostring(centre), farthest = string.format("%.6f", far)}
