"""Bindings: globals carried between executions (docs/protocol.md §3, §8-9)."""

import json

import sbx

WEATHER = [{"name": "Weather", "module": "MyApp.Tools.Weather",
            "functions": [{"name": "get", "arities": [1, 2]}]}]


def roundtrip(b):
    """What a client store does with the opaque value."""
    return json.loads(json.dumps(b))


def run(client, code, bindings=None, **kw):
    return client.exec_ok(code, bindings=bindings if bindings is not None else [], **kw)


def test_global_survives(client):
    r1 = run(client, "x = 40")
    assert r1["value"] is None
    assert r1["binding_names"] == ["x"]
    r2 = run(client, "return x + 2", roundtrip(r1["bindings"]))
    assert r2["value"] == 42
    assert r2["binding_names"] == ["x"]


def test_fresh_state_without_bindings(client):
    run(client, "leak = 1")
    assert client.value("return leak") is None
    assert client.value("return leak", bindings=[]) is None


def test_binding_names_method_matches(client):
    r = run(client, "count = 3; items = {1, 2}; flag = false; name = 'n'")
    names = client.call("binding_names", {"bindings": roundtrip(r["bindings"])})
    assert names.ok and names.result == r["binding_names"]
    assert sorted(r["binding_names"]) == ["count", "flag", "items", "name"]


def test_integer_float_preserved(client):
    r = run(client, "i = 3; f = 3.0; big = math.maxinteger; small = math.mininteger; half = 0.1")
    b = roundtrip(r["bindings"])
    v = client.value("return math.type(i), math.type(f), i, f, big == math.maxinteger, "
                     "small == math.mininteger, half == 0.1", bindings=b)
    assert v == ["integer", "float", 3, 3.0, True, True, True]
    res = client.execute("return f", bindings=b)
    assert '"value":3.0' in res.raw, res.raw


def test_special_floats_preserved(client):
    r = run(client, "inf = math.huge; ninf = -math.huge; nan = 0/0; negz = -0.0; tiny = 5e-324")
    v = client.value("return inf == math.huge, ninf == -math.huge, nan ~= nan, "
                     "math.type(nan), 1/negz == -math.huge, tiny == 5e-324",
                     bindings=roundtrip(r["bindings"]))
    assert v == [True, True, True, "float", True, True]


def test_non_utf8_strings_preserved(client):
    r = run(client, 's = "\\xff\\xfe"; z = "a\\0b"; mixed = "ok\\xc3(\\x80"; u = "h\\u{E9}"')
    b = roundtrip(r["bindings"])
    v = client.value("return {string.byte(s, 1, -1)}, #s, {string.byte(z, 1, -1)}, "
                     "{string.byte(mixed, 1, -1)}, u == 'h\\u{E9}'", bindings=b)
    assert v == [[255, 254], 2, [97, 0, 98], [111, 107, 0xc3, 0x28, 0x80], True]


def test_non_string_keys_preserved(client):
    r = run(client, "t = {[1] = 'one', [2.5] = 'float', [true] = 'yes', [false] = 'no', "
                    "[10] = 'ten', ['10'] = 'string ten', [-3] = 'neg'}")
    v = client.value("return t[1], t[2.5], t[true], t[false], t[10], t['10'], t[-3]",
                     bindings=roundtrip(r["bindings"]))
    assert v[:7] == ["one", "float", "yes", "no", "ten", "string ten", "neg"]
    v = client.value("local n = 0 for k, v in pairs(t) do n = n + 1 end return n",
                     bindings=roundtrip(r["bindings"]))
    assert v == 7


def test_arrays_and_empty_tables(client):
    r = run(client, "arr = {10, 20, 30}; empty = {}; holes = {1, nil, 3}")
    v = client.value("return #arr, arr[3], type(empty), next(empty) == nil, holes[1], holes[2], holes[3]",
                     bindings=roundtrip(r["bindings"]))
    assert v == [3, 30, "table", True, 1, None, 3]


def test_nested_tables(client):
    r = run(client, "items = {{x = 1}, {x = 2, y = {z = 'deep', list = {1.5, 2}}}}")
    v = client.value("return items[2].x, items[2].y.z, items[2].y.list[1], math.type(items[2].y.list[2]), #items",
                     bindings=roundtrip(r["bindings"]))
    assert v == [2, "deep", 1.5, "integer", 2]


def test_locals_and_functions_not_kept(client):
    r = run(client, "local a = 1; b = 2; function helper() return 1 end; f = print; "
                    "co = coroutine.create(function() end); "
                    "t = {keep = 1, fn = print, [print] = 2}")
    assert sorted(r["binding_names"]) == ["b", "t"]
    v = client.value("return a, b, type(helper), type(f), type(co), t.keep, t.fn, "
                     "(function() local n = 0 for _ in pairs(t) do n = n + 1 end return n end)()",
                     bindings=roundtrip(r["bindings"]))
    assert v == [None, 2, "nil", "nil", "nil", 1, None, 1]


def test_metatables_not_kept(client):
    r = run(client, "m = setmetatable({v = 1}, {__index = function() return 'meta' end})")
    v = client.value("return m.v, m.other, getmetatable(m)", bindings=roundtrip(r["bindings"]))
    assert v == [1, None, None]


def test_globals_set_to_nil_absent(client):
    r1 = run(client, "a = 1; b = 2")
    r2 = run(client, "a = nil", roundtrip(r1["bindings"]))
    assert r2["binding_names"] == ["b"]


def test_rebinding_G(client):
    r = run(client, "_G = nil; x = 1")
    assert r["binding_names"] == ["x"]
    r = run(client, "_G = {evil = 1}; y = 2")
    assert r["binding_names"] == ["y"]
    assert client.value("return y, type(_G), _G.evil", bindings=roundtrip(r["bindings"])) == [2, "table", None]


def test_stdlib_names_never_saved(client):
    r = run(client, "string = 5; print = nil; math.myconst = 5; table.helper = function() end; mine = 'ok'")
    assert r["binding_names"] == ["mine"]
    v = client.value("return type(string), string.upper('a'), type(print), math.myconst, table.helper, mine",
                     bindings=roundtrip(r["bindings"]))
    assert v == ["table", "A", "function", None, None, "ok"]


def test_stored_binding_cannot_override_tool(client):
    # saved while Weather was not a tool ...
    r = run(client, "Weather = 5; other = 1")
    assert sorted(r["binding_names"]) == ["Weather", "other"]
    # ... restored into a run where it is: the tool wins
    v = client.value("return type(Weather), Weather.__module, type(Weather.get), other",
                     bindings=roundtrip(r["bindings"]), tools=WEATHER)
    assert v == ["table", "MyApp.Tools.Weather", "function", 1]


def test_tool_name_shadowing_not_saved(client):
    r = run(client, "Weather = 1; x = 2", tools=WEATHER)
    assert r["binding_names"] == ["x"]
    v = client.value("return type(Weather), x", bindings=roundtrip(r["bindings"]), tools=WEATHER)
    assert v == ["table", 2]


def test_revoked_tool_unreachable(client):
    r = run(client, "w = Weather; g = Weather.get; n = 1", tools=WEATHER)
    assert "g" not in r["binding_names"]
    v = client.value("return type(g), type(Weather), type(w), w and w.__module, w and w.get, n",
                     bindings=roundtrip(r["bindings"]))
    assert v[0] == "nil" and v[1] == "nil" and v[4] is None and v[5] == 1
    assert v[2] in ("table", "nil")
    if v[2] == "table":
        assert v[3] == "MyApp.Tools.Weather"


def test_cyclic_table_does_not_crash(client):
    r = run(client, "cyclic = {}; cyclic.self = cyclic; cyclic.v = 7; n = 1")
    assert "n" in r["binding_names"] and "cyclic" in r["binding_names"]
    v = client.value("return type(cyclic), cyclic.v, n", bindings=roundtrip(r["bindings"]))
    assert v == ["table", 7, 1]
    client.ping()


def test_shared_subtable(client):
    r = run(client, "shared = {1, 2}; a = {p = shared, q = shared}")
    v = client.value("return a.p[2], a.q[1]", bindings=roundtrip(r["bindings"]))
    assert v == [2, 1]


def test_deep_nesting_does_not_crash(client):
    r = client.execute("deep = {} local c = deep for i = 1, 10000 do c.n = {} c = c.n end ok = 1")
    assert r.ok or r.kind in ("runtime_error", "bindings_too_large"), r
    if r.ok:
        assert "ok" in r.result["binding_names"]
        client.exec_ok("return ok", bindings=roundtrip(r.result["bindings"]))
    client.ping()


def test_bindings_chain_many_runs(client):
    b = []
    for i in range(5):
        r = run(client, "count = (count or 0) + 1; hist = hist or {}; hist[#hist + 1] = count", b)
        b = roundtrip(r["bindings"])
    assert client.value("return count, #hist, hist[5]", bindings=b) == [5, 5, 5]


def test_bindings_too_large(client):
    r = client.execute("big = string.rep('x', 20000)", limits={"max_bindings_bytes": 1000})
    assert r.code == -32012 and r.kind == "bindings_too_large", r
    assert isinstance(r.data.get("stats"), dict)
    r = client.execute("small = string.rep('x', 100)", limits={"max_bindings_bytes": 1000})
    assert r.ok, r


def test_malformed_bindings(client):
    for b in ([["x"]], [[5, 1]], [["x", ["t", 5]]], {"x": 1}):
        r = client.execute("return 1", bindings=b)
        assert r.code == -32602 and r.kind == "invalid_params", (b, r)
    client.ping()


def test_more_sandbox_names_never_saved(client):
    r = run(client, "_VERSION = 1; coroutine = 3; utf8 = 4; load = 5; pcall = 6; os = 7; kept = 8")
    assert r["binding_names"] == ["kept"]
    v = client.value("return _VERSION, type(coroutine), type(utf8), type(load), type(pcall), type(os), kept",
                     bindings=roundtrip(r["bindings"]))
    assert v == ["Lua 5.3", "table", "table", "function", "function", "table", 8]


def test_odd_global_names(client):
    r = run(client, "_G['a b'] = 1; _G[1] = 'int key'; _G[true] = 'bool key'; _G['\\xff'] = 'bad name'; "
                    "_G['\\u{E9}t\\u{E9}'] = 2")
    assert sorted(r["binding_names"]) == sorted(["a b", "\u00e9t\u00e9"]), r["binding_names"]
    v = client.value("return _G['a b'], _G['\\u{E9}t\\u{E9}'], _G[1]", bindings=roundtrip(r["bindings"]))
    assert v == [1, 2, None]


def test_result_frame_bound_counts_binding_names(daemon_factory):
    """The worker's result frame carries the value, the bindings and
    binding_names, and each name is in both: a result within the limits (a
    global name of most of max_bindings_bytes beside a value of most of
    max_message_bytes) is answered, not `crashed` as an oversized frame."""
    d = daemon_factory(daemon={"max_message_bytes": 1 << 20},
                       defaults={"max_bindings_bytes": 4000000},
                       ceilings={"max_bindings_bytes": 4000000})
    c = d.client()
    r = c.execute("_G[string.rep('n', 3500000)] = 1 return string.rep('v', 1000000)",
                  limits={"max_bindings_bytes": 4000000}, timeout=30 * sbx.SCALE)
    assert r.ok, r
    assert len(r.result["value"]) == 1000000
    assert r.result["binding_names"] == ["n" * 3500000]


def records_bindings(n, bad_at=None):
    """Bindings of one global `records`: n records of two fields, as the
    daemon stores them; with bad_at, that record's score is null."""
    recs = []
    for i in range(1, n + 1):
        score = None if i == bad_at else i * 7
        recs.append([i, ["t", [["name", "user-%06d@example.org" % i], ["score", score]]]])
    return [["records", ["t", recs]]]


def test_binding_names_takes_what_execute_takes(daemon_factory):
    """binding_names reads large bindings without building them as a tree,
    so it takes what execute takes: 50,000 records of two fields (3 MB,
    some 50 MB as jansson values, past the parse budget of 4 bytes a byte
    plus 16 MiB) give their name, as execute restores them.  The same text
    with one null inside is still refused, as the small path refuses it."""
    d = daemon_factory(daemon={"max_message_bytes": 16 << 20})
    c = d.client(timeout=60 * sbx.SCALE)
    b = records_bindings(50000)
    assert len(json.dumps(b, separators=(",", ":"))) > 3000000
    assert c.value("return #records, records[50000].name", bindings=b) == [50000, "user-050000@example.org"]
    r = c.call("binding_names", {"bindings": b})
    assert r.ok and r.result == ["records"], r
    r = c.call("binding_names", {"bindings": records_bindings(50000, bad_at=49999)})
    assert r.kind == "invalid_params" and "null, a bare real or an object" in r.message, r
    r = c.call("binding_names", {"bindings": records_bindings(3, bad_at=2)})
    assert r.kind == "invalid_params" and "null, a bare real or an object" in r.message, r
    many = [["g%06d" % i, i] for i in range(200000)]
    r = c.call("binding_names", {"bindings": many})
    assert r.ok and r.result == ["g%06d" % i for i in range(200000)], r.raw[:200]


def test_bindings_size_exact(daemon_factory):
    """max_bindings_bytes bounds the bindings' compact JSON text exactly:
    300,000 integers sent in (4.58 MB) and left alone come back under the
    default 10,000,000, where 21 bytes counted an integer refused them; and
    bindings of exactly max_bindings_bytes bytes are returned while one byte
    less of limit is bindings_too_large."""
    d = daemon_factory(daemon={"max_message_bytes": 16 << 20})
    c = d.client(timeout=60 * sbx.SCALE)
    b = [["t", ["t", [[i, i] for i in range(1, 300001)]]]]
    text = json.dumps(b, separators=(",", ":"))
    assert len(text) > 4500000
    r = c.execute("return #t", bindings=b)
    assert r.ok and r.result["value"] == 300000, r
    assert json.dumps(r.result["bindings"], separators=(",", ":")) == text
    # the boundary, with escapes, floats, "b" strings and nested tables in it
    code = ("s = 'q\"\\\\\\n\\t\\1\\127\\u{E9}' n = {math.mininteger, -7, 0, 1.5, 0/0, true, false}"
            " raw = '\\xff\\x00' nest = {{{}}, k = {[2.5] = 'x'}}")
    r = c.execute(code)
    assert r.ok, r
    size = len(json.dumps(r.result["bindings"], separators=(",", ":"), ensure_ascii=False)
               .encode("utf-8"))
    r = c.execute(code, limits={"max_bindings_bytes": size})
    assert r.ok, r
    r = c.execute(code, limits={"max_bindings_bytes": size - 1})
    assert r.kind == "bindings_too_large", r
    assert "(%d bytes)" % (size - 1) in r.message, r
