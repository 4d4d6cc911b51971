-- Validate and normalise generated e-mail addresses with Lua patterns.
local users = {"alice", "bob.smith", "c_d", "eve+news", "frank-o", "", "g..h", "ivy"}
local domains = {"example.com", "mail.example.org", "EXAMPLE.NET", "bad_domain", "x.io", "localhost"}
local valid, invalid, normalised = 0, 0, {}
local function is_valid(addr)
  local user, domain = addr:match("^([%w%.%+_%-]+)@([%w%-]+%.[%w%.%-]+)$")
  if not user then return false end
  if user:find("..", 1, true) or user:sub(1, 1) == "." then return false end
  if not domain:match("%.%a%a+$") then return false end
  return true, user:lower() .. "@" .. domain:lower()
end
for i = 1, 25000 do
  local addr = users[i % #users + 1] .. (i % 13 == 0 and "" or tostring(i % 100)) .. "@" ..
               domains[(i * 7) % #domains + 1]
  if i % 29 == 0 then addr = " " .. addr end
  local ok, norm = is_valid(addr)
  if ok then
    valid = valid + 1
    normalised[norm] = true
  else
    invalid = invalid + 1
  end
end
local distinct = 0
for _ in pairs(normalised) do distinct = distinct + 1 end
return {valid = valid, invalid = invalid, distinct = distinct}
