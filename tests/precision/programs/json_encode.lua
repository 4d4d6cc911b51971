-- A hand-written JSON encoder (sorted keys) serializing a list of users.
local function escape(s)
  return (s:gsub('[%c"\\]', function(c)
    local map = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\t'] = '\\t'}
    return map[c] or string.format("\\u%04x", c:byte())
  end))
end

local encode
local function encode_table(t, buf)
  if #t > 0 or next(t) == nil then
    buf[#buf + 1] = "["
    for i, v in ipairs(t) do
      if i > 1 then buf[#buf + 1] = "," end
      encode(v, buf)
    end
    buf[#buf + 1] = "]"
  else
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    buf[#buf + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then buf[#buf + 1] = "," end
      buf[#buf + 1] = '"' .. escape(k) .. '":'
      encode(t[k], buf)
    end
    buf[#buf + 1] = "}"
  end
end

function encode(v, buf)
  local ty = type(v)
  if ty == "table" then encode_table(v, buf)
  elseif ty == "string" then buf[#buf + 1] = '"' .. escape(v) .. '"'
  elseif ty == "number" then
    buf[#buf + 1] = math.type(v) == "integer" and tostring(v) or string.format("%.14g", v)
  elseif ty == "boolean" then buf[#buf + 1] = tostring(v)
  else buf[#buf + 1] = "null" end
end

local users = {}
for i = 1, 5000 do
  users[i] = {
    id = i,
    name = "user" .. i,
    email = "user" .. i .. "@example.com",
    active = i % 3 ~= 0,
    score = (i * 7919 % 1000) / 10,
    tags = {"t" .. (i % 7), "g" .. (i % 11)},
    note = (i % 50 == 0) and "says \"hi\"\n" or "",
  }
end
local buf = {}
encode({users = users, count = #users, version = "1.0"}, buf)
local json = table.concat(buf)
local h = 0
for i = 1, #json, 7 do h = (h * 31 + json:byte(i)) & 0xffffffff end
return {bytes = #json, hash = h}
