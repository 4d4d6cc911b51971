-- Draw boxed text panels with string.rep padding and centre alignment.
local function center(s, width)
  local pad = width - #s
  local left = pad // 2
  return string.rep(" ", left) .. s .. string.rep(" ", pad - left)
end
local function panel(title, lines, width)
  local out = {"+" .. string.rep("-", width) .. "+", "|" .. center(title, width) .. "|",
               "+" .. string.rep("=", width) .. "+"}
  for _, l in ipairs(lines) do out[#out + 1] = "| " .. l .. string.rep(" ", width - #l - 1) .. "|" end
  out[#out + 1] = "+" .. string.rep("-", width) .. "+"
  return table.concat(out, "\n")
end
local panels = {}
for i = 1, 1500 do
  local lines = {}
  for k = 1, i % 6 + 2 do lines[k] = string.format("line %d of panel %d: %s", k, i, string.rep("*", (i + k) % 20)) end
  panels[i] = panel("Panel " .. i, lines, 60)
end
local doc = table.concat(panels, "\n\n")
return {bytes = #doc, panels = #panels, stars = select(2, doc:gsub("%*", ""))}
