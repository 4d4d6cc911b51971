-- Naive string accumulation with .. in a loop (quadratic garbage), as models often write.
local s = ""
for i = 1, 6000 do
  s = s .. string.format("row %05d: %s\n", i, ("abc"):rep(i % 10))
end
local count = select(2, s:gsub("\n", ""))
return {bytes = #s, lines = count, tail = s:sub(-12)}
