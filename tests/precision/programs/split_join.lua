-- Split delimited records into fields, trim and normalise them, and join them again.
local function split(s, sep)
  local out, start = {}, 1
  while true do
    local i = s:find(sep, start, true)
    if not i then out[#out + 1] = s:sub(start); break end
    out[#out + 1] = s:sub(start, i - 1)
    start = i + #sep
  end
  return out
end
local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end
local rows = {}
for i = 1, 12000 do
  rows[i] = string.format("  %d |  Name %d  | %s|  %d.%d | tag%d , tag%d ", i, i,
    (i % 4 == 0) and "" or ("city" .. i % 50), i % 100, i % 10, i % 3, i % 5)
end
local out, empty = {}, 0
for _, row in ipairs(rows) do
  local fields = split(row, "|")
  for k = 1, #fields do
    fields[k] = trim(fields[k])
    if fields[k] == "" then fields[k] = "NULL"; empty = empty + 1 end
  end
  local tags = split(fields[5], ",")
  for k = 1, #tags do tags[k] = trim(tags[k]):upper() end
  fields[5] = table.concat(tags, ";")
  out[#out + 1] = table.concat(fields, "\t")
end
local tsv = table.concat(out, "\n")
return {bytes = #tsv, empty = empty, sample = out[4]}
