-- Build a 4 MiB text export line by line in a buffer table, then join it once.
local parts = {}
local n = 0
local row = 0
while n < 4 * 1024 * 1024 do
  row = row + 1
  local line = string.format("%08d;%s;%012.3f;%s\n", row, ("item-" .. row % 997), row * 1.25,
    row % 2 == 0 and "even" or "odd")
  parts[#parts + 1] = line
  n = n + #line
end
local text = table.concat(parts)
local lines = select(2, text:gsub("\n", "\n"))
return {bytes = #text, rows = row, lines = lines, tail = text:sub(-20)}
