-- Format a numeric table with string.format (floats, padding, thousands separators).
local function thousands(n)
  local s = string.format("%d", n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end
local lines = {string.format("%-6s %14s %10s %9s %8s", "id", "amount", "rate", "share", "flag")}
local total = 0
for i = 1, 8000 do
  local amount = (i * 7919) % 10000000
  local rate = ((i * 31) % 1000) / 37
  total = total + amount
  lines[#lines + 1] = string.format("%-6d %14s %10.4f %8.2f%% %8s", i, thousands(amount), rate,
    100 * amount / 10000000, (i % 3 == 0) and "yes" or "no")
end
lines[#lines + 1] = string.format("total %s", thousands(total))
local text = table.concat(lines, "\n")
return {length = #text, last = lines[#lines], mid = lines[4001]}
