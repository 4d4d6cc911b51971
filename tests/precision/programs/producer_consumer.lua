-- A producer -> filter -> transformer -> consumer pipeline of coroutines.
local function producer(n)
  return coroutine.create(function()
    for i = 1, n do coroutine.yield(string.format("rec-%06d,%d", i, i * 37 % 1000)) end
  end)
end
local function receive(co)
  local ok, v = coroutine.resume(co)
  if ok then return v end
  error(v)
end
local function filter(src)
  return coroutine.create(function()
    while true do
      local rec = receive(src)
      if rec == nil then return end
      local id, value = rec:match("^rec%-(%d+),(%d+)$")
      if tonumber(value) % 2 == 0 then coroutine.yield({id = tonumber(id), value = tonumber(value)}) end
    end
  end)
end
local function transform(src)
  return coroutine.create(function()
    while true do
      local r = receive(src)
      if r == nil then return end
      r.scaled = r.value * 1.5
      coroutine.yield(r)
    end
  end)
end
local pipeline = transform(filter(producer(30000)))
local count, total, last = 0, 0, nil
while true do
  local r = receive(pipeline)
  if r == nil then break end
  count = count + 1
  total = total + r.scaled
  last = r.id
end
return {count = count, total = total, last = last}
