"""The instruction budget's charges for work beyond VM instructions
(worker/charge.h; docs/protocol.md, "Limits"): what a chunk is
billed, and that a budget that pays for the work lets it run."""

import json
import os
import subprocess

import pytest

import sbx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METER = os.environ.get("LUA_METER") or os.path.join(REPO, "build", "tests", "lua_meter")


def meter(code, stock=False):
    """What tests/tools/lua_meter measures for code with the stock liblua5.3:
    {"ok", "instructions", "charges", "reductions", "heap_peak", "results"}."""
    assert os.path.exists(METER), "%s is missing (make %s)" % (METER, METER)
    out = subprocess.run([METER] + (["--stock"] if stock else []) + ["-e", code],
                         capture_output=True, timeout=120 * sbx.SCALE, check=True)
    return json.loads(out.stdout)


def as_value(results):
    """The meter's results as sandboxd returns them: none is null, one is
    itself, several a list."""
    return None if not results else results[0] if len(results) == 1 else results


def test_string_bytes_charged(client):
    """A new string costs one reduction per 64 bytes of its length, whoever
    makes it (string.rep, `..`); under 1000 instructions the count hook adds
    nothing, so the reductions are the charges exactly."""
    r = client.exec_ok("local s = string.rep('x', 64000) .. 'y' return #s",
                       limits={"max_reductions": 100000})
    assert r["value"] == 64001
    assert r["stats"]["reductions"] == 1000 + 1000, r
    # strings shorter than 64 bytes cost nothing
    r = client.exec_ok("local n = 0 for i = 1, 100 do n = n + #('s' .. i) end return n",
                       limits={"max_reductions": 100000})
    assert r["stats"]["reductions"] == 0, r


def test_string_doubling_neighbour(client):
    """The neighbour of 246-string-concat-bytes: doubling a string to 1 MiB
    under a budget that pays for its bytes (2 MiB made in all, 32768
    reductions) completes."""
    r = client.exec_ok("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 40000})
    assert r["value"] == 1 << 20
    assert 32000 <= r["stats"]["reductions"] <= 33000, r
    r = client.execute("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 20000})
    assert r.kind == "reductions_limit", r


def test_tool_results_not_charged(client):
    """A tool's answer is the client's value, not the chunk's work: a long
    string from a tool costs nothing."""
    big = "z" * 200000
    r = client.execute("return #T.get()", tools=[{"name": "T", "functions": ["get"]}],
                       limits={"max_reductions": 1000},
                       handlers={"T.get": lambda args: big})
    assert r.ok and r.result["value"] == 200000, r
    assert r.result["stats"]["reductions"] == 0, r


GENERATOR = ("local gen = coroutine.wrap(function() for i = 1, 166668 do coroutine.yield(i) end end) "
             "local s = 0 for i = 1, 166668 do s = s + gen() end return s")
PIPELINE = """
local function producer()
  return coroutine.create(function()
    for i = 1, 20000 do coroutine.yield("line " .. i) end
  end)
end
local function filter(src)
  return coroutine.create(function()
    while true do
      local ok, v = coroutine.resume(src)
      if not v then break end
      if #v % 2 == 0 then coroutine.yield(v:upper()) end
    end
  end)
end
local f = filter(producer())
local n, total = 0, 0
while true do
  local ok, v = coroutine.resume(f)
  if not v then break end
  n = n + 1 total = total + #v
end
return n * 100000 + total
"""


def test_coroutines_billed_their_instructions(client):
    """A coroutine's countdown runs on across its resumes and it pays each
    period as it begins: a generator loop (166,668 resumes) and a pipeline
    are billed what stock Lua counts (1,500,027 instructions for the
    generator), to within the main thread's last step (999 unbilled) and each
    coroutine's last period (at most 1000 more)."""
    for code, coroutines in ((GENERATOR, 1), (PIPELINE, 2)):
        need = meter(code)["reductions"]
        r = client.exec_ok(code, limits={"max_reductions": 2 * need})
        red = r["stats"]["reductions"]
        assert need - 1000 <= red <= need + 1004 * coroutines, (code, red, need)
    assert meter(GENERATOR)["instructions"] == 1500027


def test_short_coroutines_billed(client):
    """A coroutine that ends before any hook call is still billed what it
    ran: at least its instructions, less than twice them plus 4.  100
    coroutines of about 900 instructions (the neighbour of
    100-coroutine-resume-billing) fit in 200,000; 1000 do not."""
    r = client.exec_ok("for i = 1, 100 do coroutine.wrap(function() for j = 1, 900 do end end)() end "
                       "return 1", limits={"max_reductions": 200000})
    assert 90000 <= r["stats"]["reductions"] <= 2 * 100 * 905 + 1000, r
    r = client.exec_ok("for i = 1, 100 do coroutine.wrap(function() end)() end return 1",
                       limits={"max_reductions": 200000})
    assert r["stats"]["reductions"] <= 1000 + 100 * 4, r


def test_library_results_unchanged():
    """The charging library functions (charge.c, pattern.c) give the
    stock functions' results and error messages: the transcript of
    tests/tools/charge_same.lua (3000 generated patterns against find,
    match, gmatch and gsub, and every other charged function with ordinary,
    odd and wrong arguments) is the same with and without them."""
    path = os.path.join(REPO, "tests", "tools", "charge_same.lua")
    with open(path) as f:
        code = f.read()
    charged, stock = meter(code), meter(code, stock=True)
    assert charged["ok"] and stock["ok"], (charged, stock)
    def lines(v):
        text = bytes.fromhex(v["bytes"]) if isinstance(v, dict) else v.encode()
        return text.split(b"\n")

    a, b = lines(charged["results"][0]), lines(stock["results"][0])
    assert len(a) == len(b) > 20000
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    assert not diff, diff[:5]
    assert charged["instructions"] == stock["instructions"]
    assert charged["charges"] > 0 and stock["charges"] == 0


# Legitimate uses of every charged function: the neighbours of the attacks
# 64, 65 and 246-262.  Each must complete in sandboxd under twice the
# reductions the meter measures, with the meter's (stock Lua's) value, be
# billed what the meter says, and end with reductions_limit under half.
NEIGHBOURS = {
    "patterns": "local t = {} for k, v in ('a=1, b=22, c=333'):gmatch('(%w+)=(%w+)') do "
                "t[#t + 1] = k .. v end local s = ('The quick brown fox'):gsub('%w+', string.upper) "
                "return table.concat(t, ';'), s, ('hello world'):find('o w'), "
                "('  trim me  '):match('^%s*(.-)%s*$'), ('key: value; other: x'):find('.-:.-;')",
    "find-plain": "local text = string.rep('lorem ipsum dolor ', 2000) "
                  "return text:find('dolor lorem', 1, true), select(2, text:gsub('ipsum', ''))",
    "gsub-table": "local s = string.rep('x', 999) .. 'z' local t = {x = 'yy', z = 'end'} "
                  "return #(s:gsub('[xz]', t))",
    "rep": "return #string.rep('ab', 3000, ','), #string.rep('-', 80)",
    "unpack": "local t = {} for i = 1, 200 do t[i] = i end return select('#', table.unpack(t))",
    "insert-front": "local t = {} for i = 1, 300 do table.insert(t, 1, i) end "
                    "local r = table.remove(t, 1) return r, t[1], t[299], #t",
    "move": "local a = {} for i = 1, 500 do a[i] = i end return #table.move(a, 1, 500, 1, {})",
    "os-date": "return os.date('!%Y-%m-%d %H:%M:%S', 86400)",
    "sort": "local t = {} for i = 1, 10000 do t[i] = (i * 7919) % 10007 end table.sort(t) "
            "local r = {} for i = 1, 300 do r[i] = {k = i % 17, n = 'n' .. i} end "
            "table.sort(r, function(a, b) return a.n < b.n end) return t[1], t[10000], r[1].n",
    "sort-len": "local n = 0 local t = setmetatable({}, {__len = function(s) n = n + 1 "
                "return rawlen(s) end}) for i = 1, 2000 do t[i] = (i * 7919) % 10007 end "
                "table.sort(t) return n, t[1], t[2000]",
    "load": "local f = load('local s = 0 for i = 1, 100 do s = s + i end return s') return f()",
    "tonumber": "local n = 0 for i = 1, 1000 do n = n + tonumber(tostring(i)) end "
                "return n, tonumber('0x1F'), tonumber('z', 36)",
    "upper": "local s = ('hello world '):rep(100) return s:upper():sub(1, 20), #s:lower(), "
             "s:reverse():sub(1, 5)",
    "concat": "local t = {} for i = 1, 2000 do t[i] = 'line ' .. i end return #table.concat(t, '\\n')",
    "format": "return string.format('%q %s %5.2f %d', 'a\\nb', 'x', 3.14159, 42)",
    "format-tostring": "local P = setmetatable({x = 1}, {__tostring = function(p) "
                       "return 'P(' .. p.x .. ')' end}) local r = {} for i = 1, 200 do "
                       "r[i] = string.format('%s and %s', P, i) end return r[200], #r",
    "byte": "local s = 'hello world' local b = {s:byte(1, -1)} return #b, b[1], string.char(72, 105)",
    "utf8": "return utf8.len('h\\u{e9}llo w\\u{f6}rld'), utf8.char(72, 228), "
            "utf8.codepoint('h\\u{e9}', 1, -1)",
    "pack": "local p = string.pack('i4 z s1', 7, 'ab', 'cd') return #p, string.unpack('i4 z s1', p)",
    "text-report": "local lines = {} for i = 1, 500 do lines[i] = string.format('%-10s|%5d|%s', "
                   "'item' .. i, i * 3, ('*'):rep(i % 20)) end local rep = table.concat(lines, '\\n') "
                   "local n = 0 for w in rep:gmatch('item%d+') do n = n + 1 end "
                   "return n, #rep, select(2, rep:gsub('|', ';'))",
}


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_neighbours_complete_at_twice_their_needs(client, name):
    code = NEIGHBOURS[name]
    m = meter(code)
    assert m["ok"], m
    need = m["reductions"]
    r = client.execute(code, limits={"max_reductions": 2 * need}, timeout_ms=20000 * sbx.SCALE)
    assert r.ok, (name, need, r)
    assert r.result["value"] == as_value(m["results"]), (name, r.result["value"], m["results"])
    red = r.result["stats"]["reductions"]
    assert need - 1000 <= red <= need + 1000, (name, red, need)
    if need >= 4000:
        r = client.execute(code, limits={"max_reductions": need // 2},
                           timeout_ms=20000 * sbx.SCALE)
        assert r.kind == "reductions_limit", (name, need, r)


def test_sort_of_a_table_with_len_pays_each_comparison(client):
    """table.sort of a table whose __len claims 2^31 - 2 values, compared by
    a C function: no Lua instruction runs, only the comparisons' charge
    can end it."""
    code = ("local t = setmetatable({}, {__len = function() return 2147483646 end, "
            "__index = {}}) table.sort(t, %s) return 1")
    for cmp in ("math.type", "nil"):
        r = client.execute(code % cmp, limits={"max_reductions": 1000000},
                           timeout_ms=60000 * sbx.SCALE)
        if cmp == "nil":    # < on nil: stock's error, before the budget
            assert r.kind == "runtime_error" and "attempt to compare two nil values" in r.message, r
        else:
            assert r.kind == "reductions_limit", r


def test_endless_charge_refused(client):
    """A charge for work that would never end (table.move over 2^62 values)
    ends the chunk before any of it runs; it is not counted (stats.reductions
    is what ran), and the verdict says what the call would have cost."""
    r = client.execute("table.move({}, 1, 1 << 62, 2) return 1", limits={"max_reductions": 1000})
    assert r.kind == "reductions_limit", r
    assert r.data["stats"]["reductions"] <= 1000, r
    assert r.message.endswith("a library call would have cost over %d more (max_reductions 1000)"
                              % ((1 << 63) - 1)), r


@pytest.mark.parametrize("budget", [1000, 5000, 123457])
def test_pattern_stops_within_a_step_of_the_budget(client, budget):
    """Pattern matching pays at the step that crosses the budget (charge.h:
    struct charge's room), not only every 4096 steps: an exponential pattern
    ends one step past max_reductions, whatever the budget."""
    code = ("local s = string.rep('a', 40) "
            "return string.find(s, string.rep('a?', 40) .. string.rep('a', 40) .. 'b')")
    r = client.execute(code, limits={"max_reductions": budget})
    assert r.kind == "reductions_limit", r
    assert r.data["stats"]["reductions"] == budget + 1, r


def test_pattern_steps_counted_in_bulk_stop_at_the_budget(client):
    """Steps the engine counts in bulk (a million start positions passed at
    once, where no digit can start a match) are paid up to the step that
    crosses the budget, so the chunk ends one step past it there too; the
    same call with room completes, billed every step (its neighbour)."""
    code = "local s = string.rep('a', 1000000) return s:find('%d')"
    r = client.execute(code, limits={"max_reductions": 100000})
    assert r.kind == "reductions_limit", r
    assert r.data["stats"]["reductions"] == 100001, r
    r = client.execute(code, limits={"max_reductions": 10000000})
    assert r.ok and r.result["value"] is None, r
    assert 1000000 < r.result["stats"]["reductions"] < 1100000, r


def test_plain_find_stops_at_the_budget(client):
    """A plain find is paid after its search, by the bytes it passed, and
    only up to the step that crosses the budget; with room, in full."""
    code = "local s = string.rep('a', 1000000) return s:find('b', 1, true)"
    r = client.execute(code, limits={"max_reductions": 20000})
    assert r.kind == "reductions_limit", r
    assert r.data["stats"]["reductions"] == 20001, r
    r = client.execute(code, limits={"max_reductions": 100000})
    assert r.ok and r.result["value"] is None, r
    assert 15625 * 2 <= r.result["stats"]["reductions"] < 15625 * 2 + 100, r


def test_pattern_error_pays_the_steps_before_it(client):
    """The steps a call took before its error (here 1,561 of backtracking to
    the first match, then "invalid use of '%' in replacement string") are
    paid before the error is raised, so a loop of caught errors cannot buy
    matching for free; the stats show them, and under half of that the
    loop ends at the budget."""
    code = ("local s = ('a'):rep(8) .. 'b' local p = ('a?'):rep(8) .. ('a'):rep(8) .. 'b' "
            "for i = 1, 1000 do pcall(string.gsub, s, p, '%x') end return 1")
    r = client.execute(code, limits={"max_reductions": 3000000})
    assert r.ok, r
    assert 1561000 <= r.result["stats"]["reductions"] < 1600000, r
    r = client.execute(code, limits={"max_reductions": 800000})
    assert r.kind == "reductions_limit", r
