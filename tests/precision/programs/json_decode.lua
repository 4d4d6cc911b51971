-- A recursive-descent JSON parser over a generated document.
local parts = {"["}
for i = 1, 4000 do
  if i > 1 then parts[#parts + 1] = "," end
  parts[#parts + 1] = string.format(
    '{"id":%d,"name":"item %d","price":%d.%02d,"tags":["a%d","b%d"],"in_stock":%s,"dims":{"w":%d,"h":%d}}',
    i, i, i % 500, i % 100, i % 9, i % 4, (i % 2 == 0) and "true" or "false", i % 30, i % 17)
end
parts[#parts + 1] = "]"
local text = table.concat(parts)

local pos = 1
local parse_value

local function skip()
  pos = text:find("[^ \t\r\n]", pos) or #text + 1
end

local function parse_string()
  local s, e = text:find('^"[^"]*"', pos)
  local str = text:sub(s + 1, e - 1)
  pos = e + 1
  return str
end

local function parse_number()
  local s, e = text:find("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
  local n = tonumber(text:sub(s, e))
  pos = e + 1
  return n
end

local function parse_array()
  pos = pos + 1
  local arr = {}
  skip()
  if text:sub(pos, pos) == "]" then pos = pos + 1 return arr end
  while true do
    arr[#arr + 1] = parse_value()
    skip()
    local c = text:sub(pos, pos)
    pos = pos + 1
    if c == "]" then return arr end
  end
end

local function parse_object()
  pos = pos + 1
  local obj = {}
  skip()
  if text:sub(pos, pos) == "}" then pos = pos + 1 return obj end
  while true do
    skip()
    local k = parse_string()
    skip()
    pos = pos + 1 -- colon
    obj[k] = parse_value()
    skip()
    local c = text:sub(pos, pos)
    pos = pos + 1
    if c == "}" then return obj end
  end
end

function parse_value()
  skip()
  local c = text:sub(pos, pos)
  if c == "{" then return parse_object()
  elseif c == "[" then return parse_array()
  elseif c == '"' then return parse_string()
  elseif text:sub(pos, pos + 3) == "true" then pos = pos + 4 return true
  elseif text:sub(pos, pos + 4) == "false" then pos = pos + 5 return false
  elseif text:sub(pos, pos + 3) == "null" then pos = pos + 4 return nil
  else return parse_number() end
end

local data = parse_value()
local in_stock, total, area = 0, 0, 0
for _, item in ipairs(data) do
  if item.in_stock then in_stock = in_stock + 1 end
  total = total + item.price
  area = area + item.dims.w * item.dims.h
end
return {items = #data, in_stock = in_stock, total = string.format("%.2f", total), area = area}
