-- Run-length encoding of generated bitmaps, then decoding and verifying.
local function rle_encode(s)
  local out, i = {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    local j = i
    while j < #s and s:sub(j + 1, j + 1) == c and j - i < 254 do j = j + 1 end
    out[#out + 1] = (j - i + 1) .. c
    i = j + 1
  end
  return table.concat(out)
end
local function rle_decode(s)
  return (s:gsub("(%d+)(%D)", function(n, c) return c:rep(tonumber(n)) end))
end
local total_in, total_out, ok = 0, 0, true
for img = 1, 40 do
  local rows = {}
  for y = 1, 64 do
    local row = {}
    for x = 1, 128 do
      row[x] = (((x // (img % 7 + 2)) + (y // 5)) % 3 == 0) and "#" or "."
    end
    rows[y] = table.concat(row)
  end
  local bitmap = table.concat(rows, "|")
  local packed = rle_encode(bitmap)
  total_in, total_out = total_in + #bitmap, total_out + #packed
  if rle_decode(packed) ~= bitmap then ok = false end
end
return {input = total_in, output = total_out, ok = ok}
