-- Patterns that backtrack: trimming with (.-)%s*$, key=value parsing, quoted fields.
local lines = {}
for i = 1, 4000 do
  lines[i] = string.rep(" ", i % 7) .. "key" .. i .. " = \"value " .. string.rep("x ", i % 30) .. "\"" ..
             string.rep(" ", i % 40)
end
local parsed, total = {}, 0
for _, line in ipairs(lines) do
  local trimmed = line:match("^%s*(.-)%s*$")
  local k, v = trimmed:match('^(%w+)%s*=%s*"(.-)"$')
  if k then parsed[k] = v; total = total + #v end
end
return {total = total, k100 = parsed.key100, n = #lines}
