-- Parse ISO dates and timestamps, bucket events by month and weekday (UTC arithmetic).
local function days_from_civil(y, m, d)
  y = (m <= 2) and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end
local weekdays = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"}
local events = {}
for i = 1, 20000 do
  events[i] = string.format("2023-%02d-%02dT%02d:%02d:%02dZ", i % 12 + 1, i % 28 + 1, i % 24, i % 60, (i * 7) % 60)
end
local by_month, by_weekday, seconds = {}, {}, 0
for _, e in ipairs(events) do
  local y, mo, d, h, mi, se = e:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)Z$")
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  local days = days_from_civil(y, mo, d)
  local key = string.format("%04d-%02d", y, mo)
  by_month[key] = (by_month[key] or 0) + 1
  local wd = weekdays[days % 7 + 1]
  by_weekday[wd] = (by_weekday[wd] or 0) + 1
  seconds = seconds + days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(se)
end
local months = {}
for k, v in pairs(by_month) do months[#months + 1] = k .. ":" .. v end
table.sort(months)
return {months = #months, first = months[1], mon = by_weekday.Mon, sun = by_weekday.Sun,
        check = os.date("!%Y-%m-%d %H:%M:%S", seconds // #events)}
