-- tests/tools/charge_same.lua - the library functions that charge.c wraps
-- or replaces, called with ordinary, odd and wrong arguments; returns a
-- transcript of every result and error.  Run under lua_meter with and
-- without --stock, the transcripts must be equal (test_charges.py): the
-- charges change no result and no error message.  The first argument of
-- the chunk, if any, is ignored; the patterns are generated from a fixed
-- seed, so the cases are the same each run.
local out = {}

local function show(...)
  local n = select("#", ...)
  local t = {}
  for i = 1, n do
    local v = select(i, ...)
    if type(v) == "string" then
      t[i] = string.format("%q", v)
    elseif math.type(v) == "float" then
      t[i] = string.format("%.17g", v)
    elseif type(v) == "table" or type(v) == "function" then
      t[i] = type(v)                -- never its address
    else
      t[i] = tostring(v)
    end
  end
  return table.concat(t, ", ")
end

local function try(name, f, ...)
  out[#out + 1] = name .. ": " .. show(pcall(f, ...))
end

local function collect(s, p)
  local r = {}
  for a, b, c in string.gmatch(s, p) do
    r[#r + 1] = show(a, b, c)
    if #r > 50 then break end
  end
  return table.concat(r, " | ")
end

-- patterns, generated
local pieces = {"a", "b", "c", "x", ".", "%a", "%d", "%w", "%s", "%p", "%A", "[ab]", "[^a]",
                "[a-c]", "[%d]", "(", ")", "()", "%b()", "%f[%w]", "%f[%W]", "%1", "%2", "*",
                "+", "-", "?", "^", "$", "%", "[", "]", "%z", " ", "1", "%%", "%]"}
local chars = {"a", "b", "c", "x", "1", "2", " ", "(", ")", "[", "]", "%", "\0", "-", "."}
math.randomseed(20)
for case = 1, 3000 do
  local p, s = {}, {}
  for k = 1, math.random(0, 6) do p[k] = pieces[math.random(#pieces)] end
  for k = 1, math.random(0, 14) do s[k] = chars[math.random(#chars)] end
  p, s = table.concat(p), table.concat(s)
  local init = math.random(-3, 5)
  try("find " .. show(s, p, init), string.find, s, p, init)
  try("findplain " .. show(s, p), string.find, s, p, 1, true)
  try("match " .. show(s, p), string.match, s, p)
  try("gmatch " .. show(s, p), collect, s, p)
  try("gsub1 " .. show(s, p), string.gsub, s, p, "<%0|%1>")
  try("gsub2 " .. show(s, p), string.gsub, s, p, {a = "A", x = false, ["1"] = 7}, 3)
  try("gsub3 " .. show(s, p), string.gsub, s, p, function(a, b) if b then return b .. "!" end end)
  try("gsub4 " .. show(s, p), string.gsub, s, p, "%2%")
end
for _, c in ipairs{
  {"hello world", "o", 1, true}, {"hello", "", 10}, {"hello", "l+", -2}, {"a.b", ".", 1, true},
  {"aaa", "a-b"}, {"  x", "^%s*(.-)%s*$"}, {"key=val", "(%w+)=(%w+)"}, {"x", "(()"},
  {"x", "%"}, {"x", "[a"}, {"x", "(x))"}, {"x", "%g"}, {"THE (quick) fox", "%f[%a]%a+"},
  {"abc", "()", 4}, {"abc", "$", 2}, {"a\0b", "%z"}, {"a\0b", "\0", 1, true},
} do
  try("find " .. show(table.unpack(c)), string.find, table.unpack(c))
  try("match " .. show(table.unpack(c)), string.match, table.unpack(c))
end
try("gsub repl %", string.gsub, "abc", "b", "%")
try("gsub repl %x", string.gsub, "abc", "b", "%x")
try("gsub repl table value", string.gsub, "abc", "b", {b = {}})
try("gsub bad repl", string.gsub, "abc", "b", true)
try("gsub max", string.gsub, "aaaa", "a", "b", 2)
try("gsub anchored", string.gsub, "aaaa", "^a", "b")
try("gsub empty", string.gsub, "abc", "", "-")
try("gsub position", string.gsub, "abc", "()b", "%1")
try("too many captures", string.find, string.rep("a", 40), string.rep("(a)", 33))
try("too complex", string.match, string.rep("a", 300), string.rep("a?", 250))

-- the other wrapped functions
local s = "hello, world"
for _, a in ipairs{{}, {1}, {-1}, {3, 7}, {-5, -1}, {0, 100}, {10, 2}, {"2", "4"}, {2.0}, {2.5}} do
  try("byte " .. show(table.unpack(a)), string.byte, s, table.unpack(a))
  try("codepoint " .. show(table.unpack(a)), utf8.codepoint, s, table.unpack(a))
  try("utf8.len " .. show(table.unpack(a)), utf8.len, "h\u{e9}llo \u{4e16}", table.unpack(a))
  try("offset " .. show(table.unpack(a)), utf8.offset, "h\u{e9}llo \u{4e16}", table.unpack(a))
end
try("byte none", string.byte)
try("byte table", string.byte, {})
try("char", string.char, 72, 105, 0, 255)
try("char bad", string.char, 256)
try("char none", string.char)
for _, f in ipairs{"%d", "%5.2f", "%q", "%s|%s", "%-10s|", "%x %X %o", "%c", "%%", "%i", "%a",
                   "%q %q", "%10.3q", "%s", "%"} do
  try("format " .. f, string.format, f, 42, "a\n\"b\0", 3.5)
  try("format str " .. f, string.format, f, "text", 1)
end
local obj = setmetatable({}, {__tostring = function() return "<obj>" end})
try("format tostring", string.format, "%s|%5s|%-8s|", obj, obj, obj)
try("format tostring bad", string.format, "%s", setmetatable({}, {__tostring = function() return 1 end}))
try("format none", string.format)
try("format int", string.format, "%d", 3.5)
for _, f in ipairs{"lower", "upper", "reverse", "len"} do
  try(f, string[f], "MiXeD cAsE 123")
  try(f .. " number", string[f], 12.5)
  try(f .. " nil", string[f])
end
try("rep", string.rep, "ab", 3, ",")
try("rep 0", string.rep, "ab", 0)
try("pack", string.pack, "i4 s1 z", 7, "abc", "def")
try("pack bad", string.pack, "i4", "x")
try("packsize", string.packsize, "i4 i8 d")
try("packsize bad", string.packsize, "s")
local packed = string.pack("i4 s1 z", 7, "abc", "def")
try("unpack", string.unpack, "i4 s1 z", packed)
try("unpack pos", string.unpack, "z", packed, 10)
try("unpack z unfinished", string.unpack, "z", "abc")
try("unpack short", string.unpack, "i8", "abc")
try("unpack pos out", string.unpack, "i4", packed, 100)

local function t5() return {"a", "b", 3, "d", 5.5} end
try("concat", table.concat, t5(), ",")
try("concat range", table.concat, t5(), "-", 2, 4)
try("concat empty range", table.concat, t5(), "-", 4, 2)
try("concat bad", table.concat, {"a", {}, "c"})
try("concat nil", table.concat, {"a", nil, "c"}, ",", 1, 3)
try("concat not table", table.concat, "abc")
try("concat meta", table.concat, setmetatable({}, {__index = function(_, k) return "k" .. k end,
                                                   __len = function() return 4 end}), "+")
try("concat meta bad", table.concat, setmetatable({"x"}, {__index = {nil, {}}}), "+", 1, 2)
try("concat meta range", table.concat, setmetatable({"p", "q", "r"}, {}), ".", 2)
for _, a in ipairs{{1, "z"}, {6, "z"}, {7, "z"}, {0, "z"}, {"z"}, {2, "z", "extra"}} do
  local t = t5()
  local ok, e = pcall(table.insert, t, table.unpack(a))
  out[#out + 1] = "insert " .. show(table.unpack(a)) .. ": " .. show(ok, e) .. " " .. show(table.unpack(t))
end
for _, a in ipairs{{}, {1}, {5}, {6}, {7}, {0}, {-1}} do
  local t = t5()
  local ok, e = pcall(table.remove, t, table.unpack(a))
  out[#out + 1] = "remove " .. show(table.unpack(a)) .. ": " .. show(ok, e) .. " " .. show(table.unpack(t))
end
try("remove empty", table.remove, {})
try("remove empty 0", table.remove, {}, 0)
for _, a in ipairs{{1, 3, 2}, {2, 5, 1}, {0, 2, 1}, {3, 1, 1}, {1, 5, 10, {}}} do
  local t = t5()
  local ok, e = pcall(table.move, t, table.unpack(a))
  out[#out + 1] = "move " .. show(table.unpack(a)) .. ": " .. show(ok) .. " " .. show(table.unpack(t))
end
try("unpack", table.unpack, t5())
try("unpack range", table.unpack, t5(), 2, 3)
try("unpack huge", table.unpack, {}, 1, 1e8)
try("unpack huger", table.unpack, {}, 1, math.maxinteger)
try("unpack nil", table.unpack)
try("pack", function(...) local p = table.pack(...) return p.n, p[1], p[3] end, 1, nil, 3)
local u = {5, 2, 8, 1, 9, 3}
table.sort(u)
out[#out + 1] = "sort " .. show(table.unpack(u))
table.sort(u, function(a, b) return a > b end)
out[#out + 1] = "sort desc " .. show(table.unpack(u))
try("sort bad", table.sort, {3, "a", 1})
try("sort nontable", table.sort, "abc")
try("utf8.char", utf8.char, 72, 0x4e16, 0x10ffff)
try("utf8.char bad", utf8.char, -1)
local codes = {}
for p, c in utf8.codes("h\u{e9}\u{4e16}!") do codes[#codes + 1] = p .. ":" .. c end
out[#out + 1] = "codes " .. table.concat(codes, " ")
try("codes bad", function() for p, c in utf8.codes("a\xffb") do end end)
try("codes cont", utf8.codes, "\x80")
for _, v in ipairs{"12", " 0x1F ", "1e3", "abc", "", "  ", "12a", "9223372036854775808"} do
  try("tonumber " .. v, tonumber, v)
  try("tonumber base " .. v, tonumber, v, 16)
end
try("tonumber none", tonumber)
try("rawequal", rawequal, string.rep("a", 100), string.rep("a", 99) .. "a")
try("rawequal diff", rawequal, "a", "b")
try("load", function() return load("return 1 + 1")() end)
try("load reader", function()
  local parts = {"return ", "2 ", "* 21"}
  local i = 0
  return load(function() i = i + 1 return parts[i] end)()
end)
try("load bad reader", load, function() return {} end)
try("load syntax", load, "return +")
try("os.date", os.date, "!%Y-%m-%d %H:%M:%S", 86400 * 365)
try("os.date table", function() return os.date("!*t", 0).year end)
try("os.date bad", os.date, "%Ez", 0)
return table.concat(out, "\n")
