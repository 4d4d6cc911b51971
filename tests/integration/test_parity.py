"""Protocol 1.1: the tool-call budget (max_tool_calls, tool_call_limit), function
names that are not Lua identifiers, the stock string metatable, and describe's
features (docs/protocol.md §3, §7)."""

import sbx

COUNTER = {"name": "T", "functions": ["f"]}


def count_handler(seen):
    def f(args):
        seen.append(args[0] if args else None)
        return len(seen)
    return {"T.f": f}


# ------------------------------------------------------------------ max_tool_calls

def test_tool_call_limit_ends_execution_uncatchable(client):
    seen = []
    r = client.exec_err("local n = 0\n"
                        "for i = 1, 10 do\n"
                        "  local ok = pcall(T.f, i)\n"
                        "  if ok then n = n + 1 end\n"
                        "end\n"
                        "return 'escaped', n",
                        kind="tool_call_limit", code_=-32014, tools=[COUNTER],
                        limits={"max_tool_calls": 3}, handlers=count_handler(seen))
    # the fourth call never reached the client, and pcall did not catch the end
    assert seen == [1, 2, 3]
    assert r.data["stats"]["tool_calls"] == 3
    assert "3 tool calls" in r.message


def test_tool_call_limit_exact_budget_passes(client):
    seen = []
    v = client.value("for i = 1, 3 do T.f(i) end return 'done'", tools=[COUNTER],
                     limits={"max_tool_calls": 3}, handlers=count_handler(seen))
    assert v == "done" and seen == [1, 2, 3]


def test_tool_call_limit_zero_forbids_any_call(client):
    seen = []
    r = client.exec_err("print('before') T.f(1) return 'escaped'", kind="tool_call_limit",
                        tools=[COUNTER], limits={"max_tool_calls": 0},
                        handlers=count_handler(seen))
    assert seen == []
    assert r.data["output"] == "before\n"


def test_tool_call_limit_values(client):
    r = client.execute("return 1", limits={"max_tool_calls": "infinity"})
    assert r.ok, r
    for bad in (-1, 1.5, "lots", None, True):
        r = client.execute("return 1", limits={"max_tool_calls": bad})
        assert r.kind == "invalid_params", (bad, r)


def test_tool_call_limit_ceiling(daemon_factory):
    d = daemon_factory(defaults={"max_tool_calls": 5}, ceilings={"max_tool_calls": 10})
    with d.client() as c:
        r = c.execute("return 1", limits={"max_tool_calls": 11})
        assert r.kind == "limit_out_of_range" and r.code == -32602, r
        r = c.execute("return 1", limits={"max_tool_calls": "infinity"})
        assert r.kind == "limit_out_of_range", r
        seen = []
        r = c.exec_err("for i = 1, 6 do T.f(i) end", kind="tool_call_limit", tools=[COUNTER],
                       handlers=count_handler(seen))
        assert seen == [1, 2, 3, 4, 5]
        desc = c.call("describe").result
        assert desc["defaults"]["max_tool_calls"] == 5
        assert desc["maximums"]["max_tool_calls"] == 10


def test_describe_tool_calls_default_infinity(client):
    desc = client.call("describe").result
    assert desc["defaults"]["max_tool_calls"] == "infinity"
    assert desc["maximums"]["max_tool_calls"] == "infinity"


# ------------------------------------------------------------------ function names

def test_function_names_that_are_not_identifiers(client):
    tools = [{"name": "Acct", "functions": ["valid?", "get-sum", {"name": "a b", "arities": [1]},
                                            "ünïcode", "x" * 128]}]
    handlers = {"Acct.valid?": lambda a: a[0] > 0, "Acct.get-sum": lambda a: a[0] + a[1],
                "Acct.a b": lambda a: "spaced", "Acct.ünïcode": lambda a: "u",
                "Acct." + "x" * 128: lambda a: "long"}
    v = client.value("return Acct['valid?'](3), Acct['get-sum'](2, 5), Acct['a b'](0), "
                     "Acct['ünïcode'](), Acct[string.rep('x', 128)]()",
                     tools=tools, handlers=handlers)
    assert v == [True, 7, "spaced", "u", "long"]
    calls = [c.function for c in client.tool_calls]
    assert calls == ["valid?", "get-sum", "a b", "ünïcode", "x" * 128]
    r = client.exec_err("return Acct['a b'](1, 2)", kind="runtime_error", tools=tools,
                        handlers=handlers)
    assert "Acct.a b takes 1 argument(s), got 2" in r.message


def test_function_names_refused(client):
    for bad in ("", "x" * 129, "nul\u0000inside", "__module"):
        r = client.execute("return 1", tools=[{"name": "Acct", "functions": [bad]}])
        assert r.kind == "invalid_params", (bad, r)
    # table names stay Lua identifiers
    for bad in ("valid?", "get-sum", "1x", "string"):
        r = client.execute("return 1", tools=[{"name": bad, "functions": ["f"]}])
        assert r.kind == "invalid_params", (bad, r)


# ------------------------------------------------------------------ string metatable

def test_string_metatable_is_stock(client):
    v = client.value("local mt = getmetatable('') return type(mt), mt.__index == string")
    assert v == ["table", True]


def test_string_metatable_change_stays_in_its_execution(client):
    v = client.value("getmetatable('').__index = function() return function() return 'poisoned' end end "
                     "return ('x'):upper()")
    assert v == "poisoned"
    assert client.value("return ('x'):upper()") == "X"


def test_string_metatable_gc_still_refused(client):
    r = client.exec_err("local mt = getmetatable('') mt.__gc = function() end "
                        "setmetatable({}, mt)", kind="runtime_error")
    assert "__gc" in r.message


# ------------------------------------------------------------------ describe

def test_describe_features(client):
    desc = client.call("describe").result
    feats = desc["features"]
    assert isinstance(feats, list) and all(isinstance(f, str) for f in feats)
    for f in ("max_tool_calls", "any_function_names", "string_metatable"):
        assert f in feats, feats
    assert len(set(feats)) == len(feats)
    known = {"sessions", "parallel", "stream_output", "max_tool_calls", "any_function_names",
             "string_metatable"}
    assert set(feats) <= known, feats
