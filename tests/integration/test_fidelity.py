"""The worker's library against stock Lua 5.3 through the daemon: argument
errors stay catchable under any budget, string.format runs no __tostring
early, table.concat and load keep stock's positions, levels and depth, and
error names do not depend on the daemon's hash seed.  Each expectation is
stock's, from tests/tools/lua_meter --stock (the system's liblua5.3); the
statement-by-statement comparison is tests/unit/test_luadiff.c."""

import shutil
import subprocess

import pytest

import sbx
from test_charges import meter

BUDGET = {"max_reductions": 10000000}


def stock_value(code):
    """What stock Lua returns for code (lua_meter --stock), as sandboxd
    returns values: none is null, one is itself, several a list."""
    m = meter(code, stock=True)
    assert m["ok"], m
    res = m["results"]
    return None if not res else res[0] if len(res) == 1 else res


def stock_error(code):
    m = meter(code, stock=True)
    assert not m["ok"], m
    return m["results"][0]


# Each: a chunk whose value is the same in stock Lua and in sandboxd, with
# and without a budget.
SAME_VALUE = [
    # an argument stock refuses is its catchable error, never the budget
    "return pcall(table.move, {}, 1, 1 << 62, 1.5)",
    "return pcall(table.move, {}, 1, math.maxinteger, 2)",
    "return pcall(table.move, {}, -1, math.maxinteger, 2)",
    "return pcall(utf8.len, '', -7, math.maxinteger)",
    "return pcall(utf8.len, 'abc', 1, math.maxinteger)",
    "return pcall(table.unpack, {}, 1, 1 << 40)",
    "return pcall(table.insert, {}, 1 << 40, 1)",
    # ... and its legitimate neighbours keep stock's value
    "return table.concat(table.move({1, 2, 3}, 1, 3, 2), ','), utf8.len('h\\195\\169llo', -3)",
    # string.format runs a __tostring only where stock does
    "local n = 0 local t = setmetatable({}, {__tostring = function() n = n + 1 return 'x' end})\n"
    "local ok, e = pcall(string.format, '%y%s', 1, t) return n, ok, e",
    "local t = setmetatable({}, {__tostring = function() error('mine') end})\n"
    "return pcall(string.format, '%q%s', {}, t)",
    "local n = 0 local t = setmetatable({}, {__tostring = function() n = n + 1 return 'x' end})\n"
    "return n, pcall(string.format, '%123s', t)",
    "return string.format('%5s|%-3s|%s', setmetatable({}, {__tostring = function() return 'ab' end}), 1, 'z')",
    # table.concat: stock's name, position, levels and C-stack depth
    "return pcall(table.concat, {1, {}, 3})",
    "local t = setmetatable({}, {__index = function(_, k) error('at ' .. k, 2) end, __len = function() return 2 end})\n"
    "return pcall(table.concat, t)",
    # load with a reader: an enclosing xpcall's handler, positions, depth
    "return xpcall(load, function(m) return 'H:' .. m end, function() error('x') end)",
    "return load(function() return {} end)",
    "return load(function() error('lvl2', 2) end)",
    # load's mode: one without "t" refuses text as stock does, before it
    # reads on (a bad chunkname still first); with "t" it loads
    "return load('return 1', 'c', 'b')",
    "return load('', 'c', 'x')",
    "return load(function() return nil end, 'c', 'b')",
    "local n = 0 return load(function() n = n + 1 return n == 1 and 'return 2' or nil end, 'c', 'b'), n",
    "return pcall(load, 'return 1', {}, 'b')",
    "return load('return 3', 'c', 'tb')()",
    # table.sort runs a table's __len once, as stock does, and keeps
    # stock's order, errors and argument checks
    "local n = 0 local t = setmetatable({3, 1, 2}, {__len = function() n = n + 1 return 3 end})\n"
    "table.sort(t) return n, t[1], t[2], t[3]",
    "local n = 0 local t = setmetatable({'b', 'c', 'a'}, {__len = function() n = n + 1 return 3 end})\n"
    "table.sort(t, function(a, b) return a > b end) return n, table.concat(t)",
    "local t = setmetatable({3, 1, 2}, {__len = function() return 3 end}) return pcall(table.sort, t, 5)",
    "local t = setmetatable({3, {}, 2}, {__len = function() return 3 end}) return pcall(table.sort, t)",
    "local t = setmetatable({3, 1, 2}, {__len = function() return 3 end})\n"
    "return pcall(table.sort, t, function(a, b) error('cmp') end)",
    "local t = setmetatable({1, 2, 3}, {__len = function() return 3 end})\n"
    "return pcall(table.sort, t, function(a, b) return true end)",
    "local t = setmetatable({}, {__len = function() return 2 end, __index = function(_, k) return -k end})\n"
    "table.sort(t) return rawget(t, 1), rawget(t, 2)",
    "return pcall(table.sort, setmetatable({}, {__len = function() return (1 << 31) - 2 end}))",
    # 5.3's words
    "return pcall(coroutine.resume, 1)",
]


@pytest.mark.parametrize("code", SAME_VALUE)
def test_same_value_as_stock(client, code):
    want = stock_value(code)
    for limits in (None, BUDGET):
        r = client.exec_ok(code, limits=limits)
        assert r["value"] == want, (code, limits, r)


# Each: how deep a recursion through a library function gets before the C
# stack runs out.  The C levels below the chunk are the lua5.3
# interpreter's in stock Lua (its main and the chunk's lua_pcall), as in a
# worker, so the count is compared with lua5.3's.
DEPTH = [
    "local n, t = 0 t = setmetatable({}, {__index = function() n = n + 1 return table.concat(t, '', 1, 1) end})\n"
    "local ok, e = pcall(table.concat, t, '', 1, 1) return n",
    "local n, r = 0 r = function() n = n + 1 local f, e = load(r) error(e, 0) end\n"
    "local f, e = load(r) return n",
    "local n, v = 0 v = setmetatable({}, {__tostring = function() n = n + 1 return string.format('%s', v) end})\n"
    "local ok, e = pcall(string.format, '%s', v) return n",
    "local n = 0 local function h(m) n = n + 1 error(m) end xpcall(error, h, 'x') return n",
]


def lua53(code):
    """What `lua5.3 -e code` writes to stdout, and its exit status."""
    lua = shutil.which("lua5.3")
    assert lua, "lua5.3 is missing (scripts/install-deps)"
    p = subprocess.run([lua, "-e", code], capture_output=True, timeout=60 * sbx.SCALE)
    return p.stdout.decode(), p.returncode


@pytest.mark.parametrize("code", DEPTH)
def test_same_depth_as_stock(client, code):
    out, status = lua53("print((function() %s end)())" % code)
    assert status == 0, out
    want = int(out)
    assert want > 150, out
    for limits in (None, BUDGET):
        r = client.exec_ok(code, limits=limits)
        assert r["value"] == want, (code, limits, r)


# Each: a chunk that ends with an error, the same message as stock's.
SAME_ERROR = [
    "return table.move({}, 1, 1 << 62, 1.5)",
    "return utf8.len('', -7, math.maxinteger)",
    "\n\nreturn table.concat(1)",
    "return table.concat({1, {}})",
    "return coroutine.resume(1)",
]


@pytest.mark.parametrize("code", SAME_ERROR)
def test_same_error_as_stock(client, code):
    want = stock_error(code)
    for limits in (None, BUDGET):
        r = client.execute(code, limits=limits)
        assert r.kind == "runtime_error" and r.message == want, (code, limits, r)


def test_function_names_do_not_depend_on_the_seed(daemon_factory):
    """luaL names a function called from C by searching the loaded tables in
    hash order, which each daemon start's seed decides: the global `unpack`
    is a copy of table.unpack, so each is found under its own name in every
    start (with one value, about half the starts said 'unpack')."""
    want = stock_value("return pcall(table.unpack, {}, 1.5)")
    assert want == [False, "bad argument #2 to 'table.unpack' (number has no integer representation)"]
    for _ in range(10):
        d = daemon_factory()
        c = d.client()
        r = c.exec_ok("return pcall(table.unpack, {}, 1.5)")
        assert r["value"] == want, r
        r = c.exec_ok("return pcall(unpack, {}, 1.5)")
        assert r["value"] == [False, "bad argument #2 to 'unpack' (number has no integer representation)"], r
        c.close()
        d.stop()


@pytest.mark.parametrize("code,cost,neighbour", [
    ("return table.move({}, 1, 1 << 40, 1)", 4 << 40, "return #table.move({}, 1, 1000, 1)"),
    ("local t = {} for i = 1, 200000 do t[i] = -i end return table.sort(t)",
     200000 * 18 * 4, "local t = {} for i = 1, 1000 do t[i] = -i end table.sort(t) return t[1]"),
])
def test_refused_charge_is_named(client, code, cost, neighbour):
    """A call whose charge alone is more than the budget has left stops
    before its work: the verdict says what it would have cost and the
    budget, and stats.reductions is what was really counted."""
    r = client.execute(code, limits=BUDGET)
    assert r.kind == "reductions_limit", r
    assert r.message.startswith("evaluation exceeded the reduction (CPU) limit after ~"), r
    assert r.message.endswith("and was killed: a library call would have cost %d more "
                              "(max_reductions 10000000)" % (cost - 8)), r
    assert r.data["stats"]["reductions"] < 10000000, r
    # a budget that pays for the neighbour lets it run
    r = client.exec_ok(neighbour, limits=BUDGET)
    assert r["value"] == stock_value(neighbour), r


# Each: a chunk whose printed bytes are the same as lua5.3's stdout, with
# and without a budget, whether it ends well or not.  print writes each
# argument as it is made, so a failing conversion leaves the ones before
# it, and a __tostring that prints writes after them.
PRINTS = [
    "print(1, 2, setmetatable({}, {__tostring = function() error('no') end}))",
    "print(1, setmetatable({}, {__tostring = function() print('inner') return 'x' end}), 3)",
    "print('a', setmetatable({}, {__tostring = function() return {} end}))",
    "print(pcall(print, 'p', setmetatable({}, {__tostring = function() error('e', 0) end}))) print('q')",
    "tostring = function(v) return '<' .. type(v) .. '>' end print(1, 'x', nil)",
    "tostring = function(v) if v == 3 then error('three', 0) end return v end print(1, 2, 3, 4)",
    "print() print(nil, false, 1.5, 2^63, -0.0, 'a\\0b')",
    "print(('x'):rep(5000), ('y'):rep(5000)) print(2)",
]


@pytest.mark.parametrize("code", PRINTS)
def test_same_output_as_stock(client, code):
    want, _ = lua53(code)
    for limits in (None, BUDGET):
        r = client.execute(code, limits=limits)
        got = r.result["output"] if r.ok else r.data["output"]
        assert got == want, (code, limits, r)


def test_a_partial_line_comes_before_the_tool_call(client):
    """The first arguments of a print that failed are output before a tool
    call the chunk makes next, live and in the result."""
    code = ("pcall(print, 1, 2, setmetatable({}, {__tostring = function() error('x') end}))\n"
            "T.f() print('after') return 1")
    seen = []

    def f(args):
        seen.append(list(client.output_notes(i)))
        return 1

    i = client.send_execute(code, tools=[{"name": "T", "functions": ["f"]}],
                            handlers={"T.f": f}, stream_output=True)
    r = client.wait(i)
    assert r.ok and r.result["output"] == "1\t2after\n", r
    assert "".join(seen[0]) == "1\t2", seen
