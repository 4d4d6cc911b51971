"""Generated variants of the precision suite: the shapes that exercise the
limits most (live data plus garbage, generators, pipelines, records kept
live, strings built by concatenation and by buffers, pattern work on large
subjects), each at a few sizes.  Every variant is an ordinary program of the
suite: measured, cached and run like the files in programs/.

variants() returns [(name, source)], in a fixed order; a name is the
template's and its parameters'.
"""

LIVE_AND_GARBAGE = """\
-- {live} MiB kept live, then {count} short-lived strings of {size} KiB built and dropped.
local keep = {{}}
for i = 1, {live} do keep[i] = string.rep(string.char(96 + i % 26), 1 << 20) end
local checksum = 0
for i = 1, {count} do
  local s = string.rep("g", {size} << 10) .. i
  checksum = checksum + #s + s:byte(-1)
end
return {{live = #keep, checksum = checksum}}
"""

GENERATOR = """\
-- A generator of {n} values, consumed by a for loop through coroutine.wrap.
local function gen(n)
  return coroutine.wrap(function()
    for i = 1, n do coroutine.yield(i * {mult}) end
  end)
end
local sum, kept = 0, {{}}
for v in gen({n}) do
  sum = sum + v
  if v % {keep_every} == 0 then kept[#kept + 1] = v end
end
return {{sum = sum, kept = #kept}}
"""

PIPELINE = """\
-- A chain of {stages} coroutine stages, each adding one to the values that pass.
local function source(n)
  return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end)
end
local function stage(prev)
  return coroutine.wrap(function()
    for v in prev do coroutine.yield(v + 1) end
  end)
end
local it = source({n})
for _ = 1, {stages} do it = stage(it) end
local sum, count = 0, 0
for v in it do sum = sum + v; count = count + 1 end
return {{sum = sum, count = count}}
"""

SHORT_COROUTINES = """\
-- {n} items, each through a short-lived coroutine made for it (coroutine.wrap per item).
local sum, kept = 0, {{}}
for i = 1, {n} do
  local step = coroutine.wrap(function(x)
    local y = coroutine.yield(x * 2)
    return x + y
  end)
  local a = step(i)
  local b = step(a)
  sum = sum + b
  if i % {keep_every} == 0 then kept[#kept + 1] = b end
end
return {{sum = sum, kept = #kept}}
"""

RECORDS = """\
-- {n} records kept live as small tables, then a summary pass.
local t = {{}}
for i = 1, {n} do t[i] = {{id = i, name = "r" .. i % 1000, value = i % 97}} end
local total = 0
for i = 1, #t do total = total + t[i].value end
return {{n = #t, total = total}}
"""

CONCAT_BUILD = """\
-- A {kib} KiB report built with .. one line at a time (each step a new string).
local s, i = "", 0
while #s < {kib} * 1024 do
  i = i + 1
  s = s .. string.format("%06d %s\\n", i, ("-"):rep(i % 50))
end
return {{bytes = #s, lines = i}}
"""

BUFFER_BUILD = """\
-- A {mib} MiB text built in a table of lines and joined once with table.concat.
local parts, n = {{}}, 0
while n < {mib} * 1048576 do
  local line = string.format("%08d,%s,%d\\n", #parts, ("v"):rep(#parts % 60), #parts % 7)
  parts[#parts + 1] = line
  n = n + #line
end
local text = table.concat(parts)
return {{bytes = #text, lines = #parts}}
"""

GSUB_SUBJECT = """\
-- gsub and gmatch over a {kib} KiB subject of words and numbers.
local words = {{}}
local i = 0
local n = 0
while n < {kib} * 1024 do
  i = i + 1
  local w = (i % 3 == 0) and tostring(i) or ("word" .. i % 37)
  words[i] = w
  n = n + #w + 1
end
local text = table.concat(words, " ")
local masked, numbers = text:gsub("%d+", function(d) return ("#"):rep(#d) end)
local count = 0
for w in masked:gmatch("%a+") do count = count + 1 end
return {{bytes = #text, numbers = numbers, words = count}}
"""

SORT_RECORDS = """\
-- {n} records sorted by a two-key comparator.
local t, s = {{}}, {seed}
for i = 1, {n} do
  s = (s * 1103515245 + 12345) % 2147483648
  t[i] = {{group = s % 17, score = (s >> 8) % 100000, id = i}}
end
table.sort(t, function(a, b)
  if a.group ~= b.group then return a.group < b.group end
  if a.score ~= b.score then return a.score > b.score end
  return a.id < b.id
end)
return {{first = t[1].id, last = t[#t].id, mid = t[{n} // 2].id}}
"""


def variants():
    out = []
    for live, count, size in ((8, 64, 1024), (24, 120, 1024), (16, 400, 256)):
        out.append(("gen_live%d_garbage%dx%dk" % (live, count, size),
                    LIVE_AND_GARBAGE.format(live=live, count=count, size=size)))
    for n, mult, keep_every in ((20000, 3, 7), (80000, 1, 1000)):
        out.append(("gen_generator_%d" % n,
                    GENERATOR.format(n=n, mult=mult, keep_every=keep_every)))
    for n, stages in ((5000, 6), (20000, 3)):
        out.append(("gen_pipeline_%dx%d" % (n, stages), PIPELINE.format(n=n, stages=stages)))
    for n, keep_every in ((20000, 10), (60000, 1000)):
        out.append(("gen_short_coroutines_%d" % n,
                    SHORT_COROUTINES.format(n=n, keep_every=keep_every)))
    for n in (40000, 160000):
        out.append(("gen_records_%d" % n, RECORDS.format(n=n)))
    for kib in (64, 256):
        out.append(("gen_concat_%dk" % kib, CONCAT_BUILD.format(kib=kib)))
    for mib in (1, 3):
        out.append(("gen_buffer_%dm" % mib, BUFFER_BUILD.format(mib=mib)))
    for kib in (256, 1024):
        out.append(("gen_gsub_%dk" % kib, GSUB_SUBJECT.format(kib=kib)))
    for n, seed in ((20000, 1), (60000, 2)):
        out.append(("gen_sort_%d" % n, SORT_RECORDS.format(n=n, seed=seed)))
    return out
