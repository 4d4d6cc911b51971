"""execute and check: values, output, stats, syntax and runtime errors."""

import re
import pytest


import sbx


# ------------------------------------------------------------------ values

def test_return_integer(client):
    r = client.execute("return 1+1")
    assert r.ok, r
    v = r.result["value"]
    assert v == 2 and type(v) is int
    assert re.search(r'"value":2[,}]', r.raw), r.raw


def test_return_float_keeps_fraction(client):
    r = client.execute("return 1.0")
    assert r.ok, r
    v = r.result["value"]
    assert v == 1.0 and type(v) is float
    assert '"value":1.0' in r.raw or re.search(r'"value":1(\.0+)?[eE]\+?0+[,}]', r.raw), r.raw
    assert type(client.value("return 7 / 2")) is float and client.value("return 7 / 2") == 3.5
    assert type(client.value("return 7 // 2")) is int
    assert client.value("return 1e100") == 1e100
    assert client.value("return -2.5") == -2.5


def test_return_extreme_integers(client):
    assert client.value("return math.maxinteger") == 2 ** 63 - 1
    assert client.value("return math.mininteger") == -2 ** 63


def test_no_return_is_null(client):
    r = client.execute("local x = 1")
    assert r.ok and "value" in r.result and r.result["value"] is None, r
    assert client.value("return") is None
    assert client.value("return nil") is None


def test_multiple_values(client):
    assert client.value('return 1, "a"') == [1, "a"]
    assert client.value("return 1, 2") == [1, 2]
    assert client.value("return nil, nil") == [None, None]
    assert client.value("return 1, nil, 3") == [1, None, 3]


def test_tables(client):
    assert client.value("return {1, {2, 3}, {a = {b = true}}}") == [1, [2, 3], {"a": {"b": True}}]
    assert client.value("return {}") == []
    assert client.value("return {a = 1, b = 'x'}") == {"a": 1, "b": "x"}
    assert client.value("return {1, 2, x = 3}") == {"1": 1, "2": 2, "x": 3}
    assert client.value("return {[1] = 'a', [3] = 'c'}") == {"1": "a", "3": "c"}
    assert client.value("return {[true] = 1}") == {"true": 1}
    r = client.execute("return {1.5, 2.0}")
    assert r.result["value"] == [1.5, 2.0] and "2.0" in r.raw, r.raw


def test_functions_in_values(client):
    assert client.value("return print") is None
    assert client.value("return {a = 1, f = print}") == {"a": 1}
    assert client.value("return 1, function() end") == [1, None]


def test_strings(client):
    assert client.value("return 'a\\0b'") == "a\x00b"
    assert client.value("return 'tab\\tnl\\n\"q\"'") == 'tab\tnl\n"q"'
    # not UTF-8: a documented substitute or an error, never invalid JSON (sbx checks)
    r = client.execute("return '\\xff\\xfeok'")
    assert r.ok or r.kind == "runtime_error", r
    if r.ok:
        assert r.result["value"].endswith("ok")


def test_unencodable_values_do_not_crash(client):
    for code in ("local t = {} t.self = t return t",
                 "return 0/0", "return math.huge", "return -math.huge",
                 "local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return t",
                 "return coroutine.create(function() end)"):
        r = client.execute(code)
        assert r.ok or r.kind == "runtime_error", (code, r)
    client.ping()


# ------------------------------------------------------------------ output

def test_print_captured(client):
    r = client.execute('print("a", 1, 2.5, nil, true) print() print("x\\ty") return 5')
    assert r.ok, r
    assert r.result["output"] == "a\t1\t2.5\tnil\ttrue\n\nx\ty\n"
    assert r.result["output_truncated"] is False
    assert r.result["value"] == 5


def test_print_order_many_lines(client):
    r = client.exec_ok("for i = 1, 2000 do print(i) end")
    assert r["output"] == "".join("%d\n" % i for i in range(1, 2001))


def test_no_output(client):
    r = client.exec_ok("return 1")
    assert r["output"] == "" and r["output_truncated"] is False


def test_output_truncated(client):
    full = "".join("hello %d\n" % i for i in range(1, 101))
    r = client.exec_ok("for i = 1, 100 do print('hello ' .. i) end return 'done'",
                       limits={"max_output_bytes": 10})
    assert r["output_truncated"] is True
    assert len(r["output"]) <= 10
    assert full.startswith(r["output"])
    assert r["value"] == "done"
    # large output under the cap is complete
    r = client.exec_ok("print(string.rep('z', 300000)) print('end')", limits={"max_output_bytes": 400000})
    assert r["output"] == "z" * 300000 + "\nend\n" and r["output_truncated"] is False


def test_output_not_utf8(client):
    r = client.exec_ok("print('a\\xff\\xfeb')")      # sbx checks the JSON is valid UTF-8
    assert r["output"].startswith("a") and r["output"].endswith("b\n"), r["output"]


def test_large_result_value(client):
    assert client.value("return string.rep('v', 500000)") == "v" * 500000


# ------------------------------------------------------------------ stats

def test_stats(client):
    r = client.exec_ok("local s = 0 for i = 1, 10000 do s = s + i end return s")
    assert r["value"] == 50005000
    st = r["stats"]
    for k in ("wall_us", "cpu_us", "reductions", "heap_peak_bytes", "tool_calls"):
        assert k in st, "stats lacks %s: %r" % (k, st)
        assert type(st[k]) is int and st[k] >= 0, (k, st)
    assert st["tool_calls"] == 0
    assert st["heap_peak_bytes"] > 0
    assert st["reductions"] > 10000
    assert st["wall_us"] > 0
    assert isinstance(r["binding_names"], list)
    for k in ("value", "bindings", "binding_names", "output", "output_truncated", "stats"):
        assert k in r


def test_stats_heap_grows_with_allocation(client):
    small = client.exec_ok("return 1")["stats"]["heap_peak_bytes"]
    big = client.exec_ok("local t = {} for i = 1, 100000 do t[i] = i end return #t")["stats"]
    assert big["heap_peak_bytes"] > small + 1000000


# ------------------------------------------------------------------ check

def test_check_ok(client):
    r = client.call("check", {"code": "return 1 + 1"})
    assert r.ok and r.result == {"ok": True}, r
    r = client.call("check", {"code": "x = Weather.get('Paris')",
                              "tools": [{"name": "Weather", "functions": ["get"]}]})
    assert r.ok and r.result == {"ok": True}, r


def test_check_does_not_run(client):
    r = client.call("check", {"code": "while true do end"}, timeout=5 * sbx.SCALE)
    assert r.ok and r.result == {"ok": True}, r
    r = client.call("check", {"code": "error('ran!')"})
    assert r.ok, r


def test_check_syntax_error(client):
    r = client.call("check", {"code": "local x ="})
    assert r.code == -32001 and r.kind == "syntax_error", r
    assert r.data.get("line") == 1, r
    r = client.call("check", {"code": "x = 1\n\nlocal y = = 2\n"})
    assert r.code == -32001 and r.data.get("line") == 3, r


def test_check_bare_expression_hint(client):
    r = client.call("check", {"code": "x = 1\nx"})
    assert r.code == -32001 and r.kind == "syntax_error", r
    assert "return" in r.message, r
    assert r.data.get("line") == 2, r


@pytest.mark.parametrize("code,hint", [
    ("x = 1\nx", True), ("x", True), ("42", True), ("local t = {}\nt.x\n", True),
    ("for i=1,3 do print(i)", False), ('x = "abc', False), ("local x = 1 +", False),
])
def test_bare_expression_hint_only_where_true(client, code, hint):
    # The note is true where `return ` in front of the chunk (or of its last
    # line) makes it compile; a missing `end`, an unfinished string or an
    # unfinished expression is not a bare expression.
    r = client.execute(code)
    assert r.kind == "syntax_error", r
    assert ("a bare expression is not a valid Lua statement" in r.message) is hint, r


def test_execute_syntax_error(client):
    r = client.execute("return (")
    assert r.code == -32001 and r.kind == "syntax_error", r
    assert r.data.get("line") == 1
    r = client.execute("x = 1\nx")
    assert r.code == -32001 and "return" in r.message, r


def test_code_size_limit(client):
    over = "return 1 --" + "x" * (65537 - len("return 1 --"))
    assert len(over) == 65537
    exact = over[:-1]
    for method in ("check", "execute"):
        r = client.call(method, {"code": over})
        assert r.code == -32008 and r.kind == "code_too_large", (method, r)
        r = client.call(method, {"code": exact})
        assert r.ok, (method, r)


def test_code_size_limit_configured(daemon_factory):
    d = daemon_factory(daemon={"max_code_bytes": 100})
    c = d.client()
    code = "return 2 --" + "y" * 89
    assert len(code) == 100
    assert c.value(code) == 2
    r = c.execute(code + "y")
    assert r.code == -32008 and r.kind == "code_too_large", r
    r = c.call("check", {"code": code + "y"})
    assert r.code == -32008, r
    c.ping()


# ------------------------------------------------------------------ runtime errors

def test_runtime_error(client):
    r = client.execute("local x = nil\nprint('hi')\nreturn x.y")
    assert r.code == -32002 and r.kind == "runtime_error", r
    assert r.data.get("line") == 3, r
    assert isinstance(r.data.get("traceback"), str) and r.data["traceback"], r
    assert r.data.get("output") == "hi\n", r
    assert isinstance(r.data.get("stats"), dict), r
    assert "index" in r.message, r


def test_error_boom(client):
    r = client.execute("error('boom')")
    assert r.code == -32002 and "boom" in r.message, r
    r = client.execute("\n\nerror('kaboom', 0)")
    assert r.code == -32002 and "kaboom" in r.message, r


def test_error_non_string_values(client):
    for code in ("error({code = 1})", "error(nil)", "error(42)", "error(setmetatable({}, {__tostring = function() error('x') end}))"):
        r = client.execute(code)
        assert r.code == -32002 and r.kind == "runtime_error", (code, r)
    client.ping()


def test_pcall_catches_runtime_errors(client):
    v = client.value("local ok, e = pcall(error, 'inner') return ok, e")
    assert v == [False, "inner"]
    v = client.value("local ok, e = pcall(function() local t = nil; return t.x end) return ok, type(e)")
    assert v == [False, "string"]
