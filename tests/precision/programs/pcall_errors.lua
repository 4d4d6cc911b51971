-- Validation with error()/pcall: structured errors, retries, and error messages.
local function parse_record(line)
  local name, age, email = line:match("^(%w*),(%-?%d*),(.*)$")
  if not name then error({code = "format", line = line}) end
  if name == "" then error({code = "name"}) end
  age = tonumber(age)
  if not age or age < 0 or age > 150 then error({code = "age", value = age}) end
  if not email:find("@", 1, true) then error("bad email: " .. email) end
  return {name = name, age = age, email = email}
end
local ok_count, errs, messages = 0, {}, {}
for i = 1, 15000 do
  local line
  local k = i % 11
  if k == 0 then line = "broken line " .. i
  elseif k == 1 then line = "," .. i % 90 .. ",x@y"
  elseif k == 2 then line = "n" .. i .. ",-" .. i % 5 .. ",x@y"
  elseif k == 3 then line = "n" .. i .. "," .. i % 90 .. ",nobody"
  else line = "n" .. i .. "," .. i % 90 .. ",n" .. i .. "@example.com" end
  local ok, res = pcall(parse_record, line)
  if ok then ok_count = ok_count + 1
  elseif type(res) == "table" then errs[res.code] = (errs[res.code] or 0) + 1
  else messages[#messages + 1] = res end
end
return {ok = ok_count, format = errs.format, name = errs.name, age = errs.age, strings = #messages,
        sample = messages[1]}
