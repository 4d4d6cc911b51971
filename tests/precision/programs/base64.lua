-- Base64 encode and decode 200 KB of generated binary data, checking the round trip.
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local enc, dec = {}, {}
for i = 1, 64 do
  local c = alphabet:sub(i, i)
  enc[i - 1] = c
  dec[c:byte()] = i - 1
end
local function encode(data)
  local out = {}
  for i = 1, #data, 3 do
    local a, b, c = data:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    out[#out + 1] = enc[(n >> 18) & 63] .. enc[(n >> 12) & 63] ..
      (b and enc[(n >> 6) & 63] or "=") .. (c and enc[n & 63] or "=")
  end
  return table.concat(out)
end
local function decode(text)
  local out = {}
  for i = 1, #text, 4 do
    local a, b, c, d = text:byte(i, i + 3)
    local n = (dec[a] << 18) | (dec[b] << 12) | ((dec[c] or 0) << 6) | (dec[d] or 0)
    local s = string.char((n >> 16) & 255)
    if c ~= 61 then s = s .. string.char((n >> 8) & 255) end
    if d ~= 61 then s = s .. string.char(n & 255) end
    out[#out + 1] = s
  end
  return table.concat(out)
end
local bytes, s = {}, 1
for i = 1, 200000 do
  s = (s * 1103515245 + 12345) % 2147483648
  bytes[i] = string.char((s >> 16) & 255)
end
local data = table.concat(bytes)
local text = encode(data)
local back = decode(text)
return {encoded = #text, roundtrip = back == data, head = text:sub(1, 24)}
