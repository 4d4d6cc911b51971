-- expect: ok
-- value: ["1970-01-01T00:00:00", "Thu Jan  1 00:00:00 1970", "string", "string", "Thursday January 001 AM", 1971, "number", false, false]
-- why: legitimate os.date use needs the timezone file and clock syscalls that the seccomp filter must allow (pre-warmed, F16); invalid conversions are ordinary errors
local t = os.date("!*t", 86400 * 365)
return {
  os.date("!%Y-%m-%dT%H:%M:%S", 0), os.date("!%c", 0), type(os.date()), type(os.date("%Z %z %x %X")),
  os.date("!%A %B %j %p", 0), t.year, type(os.date("*t").isdst and 1 or 0),
  (pcall(os.date, "%Q")), (pcall(os.date, "%Ez")),
}
