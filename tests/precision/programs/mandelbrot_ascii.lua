-- Render the Mandelbrot set as ASCII art and return a digest of the picture.
local W, H, MAX = 100, 50, 120
local shades = " .:-=+*#%@"
local rows = {}
for py = 0, H - 1 do
  local row = {}
  local ci = (py / H) * 2.4 - 1.2
  for px = 0, W - 1 do
    local cr = (px / W) * 3.5 - 2.5
    local zr, zi, n = 0.0, 0.0, 0
    while n < MAX and zr * zr + zi * zi <= 4 do
      zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
      n = n + 1
    end
    local k = n == MAX and #shades or (n % (#shades - 1)) + 1
    row[#row + 1] = shades:sub(k, k)
  end
  rows[#rows + 1] = table.concat(row)
end
local picture = table.concat(rows, "\n")
local digest = 0
for i = 1, #picture do digest = (digest * 131 + picture:byte(i)) % 4294967291 end
local inside = select(2, picture:gsub("@", ""))
return {digest = digest, inside = inside, bytes = #picture}
