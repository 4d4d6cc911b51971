-- Search a 6 MiB log for markers with plain find, anchored patterns and captures.
local chunks = {}
for i = 1, 60000 do
  local level = (i % 97 == 0) and "ERROR" or ((i % 13 == 0) and "WARN" or "INFO")
  chunks[i] = string.format("%07d %s component=%s took=%dms msg=%s\n", i, level,
    (i % 3 == 0) and "db" or "http", i % 1000, ("x"):rep(i % 40))
end
local log = table.concat(chunks)
local errors, pos = 0, 1
while true do
  local s, e = log:find("ERROR", pos, true)
  if not s then break end
  errors = errors + 1
  pos = e + 1
end
local slow = 0
for ms in log:gmatch("took=(%d+)ms") do
  if tonumber(ms) > 900 then slow = slow + 1 end
end
local first_warn = log:match("(%d+) WARN")
local last_db = log:match(".*(%d%d%d%d%d%d%d) %u+ component=db")
return {bytes = #log, errors = errors, slow = slow, first_warn = first_warn, last_db = last_db}
