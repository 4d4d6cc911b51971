-- expect: ok
-- value: ["resulting string too large", "resulting string too large", "resulting string too large", "resulting string too large", "resulting string too large"]
-- limits: {"max_heap": 20000000}
-- why: string.format builds its result in a buffer; when the result is over the string cap the error is catchable, and the dead buffer (freed only by its finalizer, which the emergency collection does not run) must not turn the next attempt into memory_limit
local s = string.rep("x", 5100000)
local r = {}
for i = 1, 5 do
  local ok, e = pcall(string.format, "%s%s", s, s)
  r[i] = e
end
return r
