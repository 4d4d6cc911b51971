-- An event emitter: listeners as closures, once-listeners, and removal.
local Emitter = {}
Emitter.__index = Emitter
function Emitter.new() return setmetatable({handlers = {}}, Emitter) end
function Emitter:on(event, fn)
  local list = self.handlers[event] or {}
  self.handlers[event] = list
  list[#list + 1] = fn
  return function()
    for i, h in ipairs(list) do if h == fn then table.remove(list, i) return true end end
    return false
  end
end
function Emitter:once(event, fn)
  local off
  off = self:on(event, function(...) off() return fn(...) end)
end
function Emitter:emit(event, ...)
  local list = self.handlers[event]
  if not list then return 0 end
  local snapshot = {table.unpack(list)}
  for _, h in ipairs(snapshot) do h(...) end
  return #snapshot
end

local bus = Emitter.new()
local stats = {clicks = 0, keys = 0, once = 0, log = {}}
bus:on("click", function(x, y) stats.clicks = stats.clicks + x + y end)
local off_keys = bus:on("key", function(k) stats.keys = stats.keys + #k end)
for i = 1, 50 do bus:once("tick", function(n) stats.once = stats.once + n end) end
bus:on("log", function(msg) stats.log[#stats.log + 1] = msg end)
local delivered = 0
for i = 1, 40000 do
  delivered = delivered + bus:emit("click", i % 640, i % 480)
  delivered = delivered + bus:emit("key", string.char(97 + i % 26):rep(i % 4 + 1))
  if i % 100 == 0 then delivered = delivered + bus:emit("tick", i) end
  if i % 10 == 0 then bus:emit("log", "event " .. i) end
  if i == 30000 then off_keys() end
end
return {clicks = stats.clicks, keys = stats.keys, once = stats.once, logged = #stats.log, delivered = delivered}
