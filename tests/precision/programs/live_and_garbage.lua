-- 40 MiB kept live, then 200 short-lived 1 MiB strings built and dropped.
local keep = {}
for i = 1, 40 do keep[i] = string.rep(string.char(96 + i % 26), 1 << 20) end
local checksum = 0
for i = 1, 200 do
  local s = string.rep("g", 1 << 20) .. i
  checksum = checksum + #s + s:byte(-1)
end
local live = 0
for i = 1, #keep do live = live + #keep[i] end
return {live = live, checksum = checksum}
