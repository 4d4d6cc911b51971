"""Tool calls, daemon to client (docs/protocol.md §3, §5)."""

import json

import pytest

import sbx
from sbx import NO_REPLY, ToolError, strip_lua_position

WEATHER = {"name": "Weather", "module": "MyApp.Tools.Weather",
           "functions": [{"name": "get", "arities": [1, 2]}, "list"]}
ECHO = {"name": "Echo", "functions": ["take", "give", "boom"]}


def test_tool_tables_exist(client):
    v = client.value("return Weather.__module, type(Weather.get), type(Weather.list), "
                     "Echo.__module, type(Echo.take), type(Nope)",
                     tools=[WEATHER, ECHO])
    assert v == ["MyApp.Tools.Weather", "function", "function", "Echo", "function", "nil"]
    assert client.tool_calls == []


def test_tool_call_params_and_result(client):
    seen = []

    def get(args):
        seen.append(args)
        return {"temp": 21.5, "city": args[0]}

    i = client.send_execute("local w = Weather.get('Paris') return w.temp, w.city",
                            tools=[WEATHER], handlers={"Weather.get": get})
    r = client.wait(i)
    assert r.ok, r
    assert r.result["value"] == [21.5, "Paris"]
    assert seen == [["Paris"]]
    call = client.tool_calls[0]
    assert call.params["execution_id"] == i
    assert call.params["tool"] == "Weather"
    assert call.params["module"] == "MyApp.Tools.Weather"
    assert call.params["function"] == "get"
    assert call.params["args"] == ["Paris"]
    assert isinstance(call.id, str)
    assert r.result["stats"]["tool_calls"] == 1


def test_execution_id_string(client):
    i = client.send_execute("return Echo.give()", tools=[ECHO],
                            handlers={"Echo.give": lambda a: "given"}, id="exec-str-1")
    r = client.wait(i)
    assert r.ok and r.result["value"] == "given", r
    assert client.tool_calls[0].execution_id == "exec-str-1"


def test_module_defaults_to_name(client):
    client.exec_ok("return Echo.give()", tools=[ECHO], handlers={"Echo.give": lambda a: 1})
    assert client.tool_calls[0].module == "Echo"


def test_sequential_tool_calls_and_stats(client):
    n = [0]

    def give(args):
        n[0] += 1
        return n[0]

    r = client.exec_ok("print('a') local x = Echo.give() print('b') local y = Echo.give() print('c') "
                       "return x + y", tools=[ECHO], handlers={"Echo.give": give})
    assert r["value"] == 3
    assert r["output"] == "a\nb\nc\n"
    assert r["stats"]["tool_calls"] == 2
    ids = [c.id for c in client.tool_calls]
    assert len(set(ids)) == 2, "tool call ids must be distinct: %r" % ids


def test_tool_args_encoding(client):
    client.exec_ok("Echo.take({1, 2, 3}, {a = 1}, 1.5, 2.0, 's', true, {}, 7, {x = {y = {1.0}}})",
                   tools=[ECHO], handlers={"Echo.take": lambda a: None})
    call = client.tool_calls[0]
    assert call.args == [[1, 2, 3], {"a": 1}, 1.5, 2.0, "s", True, [], 7, {"x": {"y": [1.0]}}]
    assert type(call.args[3]) is float and type(call.args[7]) is int
    raw_args = call.raw[call.raw.index('"args"'):]
    assert "2.0" in raw_args and "[1.0]" in raw_args, call.raw


def test_tool_args_nil_and_mixed(client):
    client.exec_ok("Echo.take(1, nil, 3)", tools=[ECHO], handlers={"Echo.take": lambda a: None})
    client.exec_ok("Echo.take({1, 2, k = 'v'}, {[1] = 'a', [3] = 'c'})", tools=[ECHO],
                   handlers={"Echo.take": lambda a: None})
    client.exec_ok("Echo.take()", tools=[ECHO], handlers={"Echo.take": lambda a: None})
    client.exec_ok("Echo.take({f = print, n = 1})", tools=[ECHO], handlers={"Echo.take": lambda a: None})
    assert client.tool_calls[0].args == [1, None, 3]
    assert client.tool_calls[1].args == [{"1": 1, "2": 2, "k": "v"}, {"1": "a", "3": "c"}]
    assert client.tool_calls[2].args == []
    assert client.tool_calls[3].args == [{"n": 1}]


def test_tool_args_unencodable(client):
    r = client.execute("local t = {} t.t = t local ok, e = pcall(Echo.take, t) return ok",
                       tools=[ECHO], handlers={"Echo.take": lambda a: "reached"})
    assert r.ok or r.kind == "runtime_error", r
    client.ping()


def test_tool_result_conversion(client):
    res = {"a": [1, 2, {"b": None}], "f": 1.0, "i": 2, "s": "x", "t": True, "e": {}, "n": None}
    v = client.value("local r = Echo.give() return #r.a, r.a[3].b == nil, math.type(r.f), "
                     "math.type(r.i), r.s, r.t, type(r.e), next(r.e) == nil, r.n == nil",
                     tools=[ECHO], handlers={"Echo.give": lambda a: res})
    assert v == [3, True, "float", "integer", "x", True, "table", True, True]
    assert client.value("return Echo.give()", tools=[ECHO], handlers={"Echo.give": lambda a: None}) is None
    assert client.value("return math.type(Echo.give())", tools=[ECHO],
                        handlers={"Echo.give": lambda a: 5.0}) == "float"
    assert client.value("return Echo.give()", tools=[ECHO],
                        handlers={"Echo.give": lambda a: "\u00e9\u2603"}) == "\u00e9\u2603"
    v = client.value("local t = Echo.give() return #t, t[1], t[2]", tools=[ECHO],
                     handlers={"Echo.give": lambda a: ["ok", 42]})
    assert v == [2, "ok", 42]


def test_tool_result_single_value(client):
    v = client.value("return select('#', Echo.give())", tools=[ECHO],
                     handlers={"Echo.give": lambda a: [1, 2, 3]})
    assert v == 1


def test_tool_error_catchable(client):
    def boom(args):
        raise ToolError("tool exploded")

    v = client.value("local ok, e = pcall(Echo.boom, 1) return ok, e", tools=[ECHO],
                     handlers={"Echo.boom": boom})
    assert v[0] is False
    assert strip_lua_position(v[1]) == "Echo.boom: tool exploded", v


def test_tool_error_uncaught(client):
    def get(args):
        raise ToolError("city not found")

    r = client.execute("print('before')\nlocal w = Weather.get('Atlantis')\nreturn w", tools=[WEATHER],
                       handlers={"Weather.get": get})
    assert r.code == -32002 and r.kind == "runtime_error", r
    assert "Weather.get: city not found" in r.message, r
    assert r.data.get("output") == "before\n"
    assert r.data.get("line") == 2, r


def test_tool_abort(client, daemon):
    def get(args):
        raise ToolError("stop everything", abort=True)

    r = client.execute("local ok = pcall(Weather.get, 'x') print('after') return 'escaped'",
                       tools=[WEATHER], handlers={"Weather.get": get})
    assert r.code == -32011 and r.kind == "tool_aborted", r
    assert "after" not in (r.data.get("output") or "")
    daemon.assert_no_leftovers()
    client.ping()


def test_arity_checked_by_daemon(client):
    v = client.value("local ok, e = pcall(Weather.get, 1, 2, 3) return ok, e", tools=[WEATHER],
                     handlers={"Weather.get": lambda a: "called"})
    assert v[0] is False
    assert strip_lua_position(v[1]) == "Weather.get takes 1 or 2 argument(s), got 3", v
    v = client.value("local ok, e = pcall(Weather.get) return ok, e", tools=[WEATHER],
                     handlers={"Weather.get": lambda a: "called"})
    assert v[0] is False
    assert strip_lua_position(v[1]) == "Weather.get takes 1 or 2 argument(s), got 0", v
    assert client.tool_calls == [], "a tool/call was sent despite the arity error"
    # allowed arities go through
    assert client.value("return Weather.get(1), Weather.get(1, 2)", tools=[WEATHER],
                        handlers={"Weather.get": lambda a: len(a)}) == [1, 2]
    # without arities any count goes through
    assert client.value("return Weather.list(1, 2, 3, 4, 5)", tools=[WEATHER],
                        handlers={"Weather.list": lambda a: len(a)}) == 5


def test_arity_error_uncaught(client):
    r = client.execute("return Weather.get(1, 2, 3)", tools=[WEATHER])
    assert r.code == -32002 and "Weather.get takes 1 or 2 argument(s), got 3" in r.message, r
    assert client.tool_calls == []


def test_reference_only_tool(client):
    tools = [{"name": "Planner", "module": "MyApp.Agents.Planner"},
             {"name": "Empty", "functions": []}]
    v = client.value("local n = 0 for k, v in pairs(Planner) do n = n + 1 end "
                     "local m = 0 for k, v in pairs(Empty) do m = m + 1 end "
                     "return n, Planner.__module, m, Empty.__module", tools=tools)
    assert v == [1, "MyApp.Agents.Planner", 1, "Empty"]
    r = client.execute("return Planner.plan()", tools=tools)
    assert r.code == -32002 and "call" in r.message and "nil" in r.message, r
    assert client.tool_calls == []


def test_tool_table_passed_as_argument(client):
    client.exec_ok("Echo.take(Weather)", tools=[ECHO, WEATHER], handlers={"Echo.take": lambda a: None})
    arg = client.tool_calls[0].args[0]
    assert isinstance(arg, dict) and arg.get("__module") == "MyApp.Tools.Weather", arg


def test_unknown_response_id_ignored(client):
    def give(args):
        client.send_raw(b'{"jsonrpc":"2.0","id":"no-such-call","result":666}\n')
        client.send_raw(b'{"jsonrpc":"2.0","id":123456,"error":{"code":1,"message":"stray","data":{"abort":true}}}\n')
        return 7

    r = client.execute("local a = Echo.give() return a * 6", tools=[ECHO], handlers={"Echo.give": give})
    assert r.ok and r.result["value"] == 42, r
    client.assert_quiet_until_ping()


def test_tool_answer_twice_ignored(client):
    i = client.send_execute("local a = Echo.give() local b = Echo.give() return a, b", tools=[ECHO],
                            handlers={"Echo.give": lambda a: NO_REPLY})
    c1 = client.wait_deferred(1)
    client.reply(c1, 1)
    client.reply(c1, 99)           # duplicate answer: must not be taken for the second call
    c2 = client.wait_deferred(2)
    client.reply(c2, 2)
    r = client.wait(i)
    assert r.ok and r.result["value"] == [1, 2], r


def test_out_of_order_executions(client):
    a = client.send_execute("return Slow.wait() + 1", tools=[{"name": "Slow", "functions": ["wait"]}],
                            handlers={"Slow.wait": lambda args: NO_REPLY})
    call = client.wait_deferred(1)
    assert call.execution_id == a
    b = client.send_execute("return 'b'")
    rb = client.wait(b)
    assert rb.ok and rb.result["value"] == "b"
    client.reply(call, 41)
    ra = client.wait(a)
    assert ra.ok and ra.result["value"] == 42, ra


def test_interleaved_tool_calls_answered_in_reverse(client):
    tools = [{"name": "T", "functions": ["f"]}]
    ids = [client.send_execute("return T.f(%d) * 10" % n, tools=tools,
                               handlers={"T.f": lambda args: NO_REPLY}) for n in range(4)]
    client.wait_deferred(4)
    by_exec = {c.execution_id: c for c in client.deferred}
    assert set(by_exec) == set(ids)
    for i in reversed(ids):
        c = by_exec[i]
        client.reply(c, c.args[0] + 1)
    for n, i in enumerate(ids):
        r = client.wait(i)
        assert r.ok and r.result["value"] == (n + 1) * 10, r


def test_tool_error_without_data(client):
    i = client.send_execute("local ok, e = pcall(Echo.boom) return ok, e", tools=[ECHO],
                            handlers={"Echo.boom": lambda a: NO_REPLY})
    c = client.wait_deferred(1)
    client.send_raw(json.dumps({"jsonrpc": "2.0", "id": c.id,
                                "error": {"code": -1, "message": "m\u00e9"}}) + "\n")
    r = client.wait(i)
    assert r.ok, r
    assert r.result["value"][0] is False
    assert strip_lua_position(r.result["value"][1]) == "Echo.boom: m\u00e9", r


def test_tool_result_deeply_nested(client):
    i = client.send_execute("local ok, e = pcall(Echo.give) return ok", tools=[ECHO],
                            handlers={"Echo.give": lambda a: NO_REPLY})
    c = client.wait_deferred(1)
    client.send_raw('{"jsonrpc":"2.0","id":%s,"result":%s%s}\n' % (json.dumps(c.id), "[" * 500, "]" * 500))
    r = client.wait(i)
    # too deep: a clear Lua error (or a documented substitute), never a crash
    assert r.ok or r.kind == "runtime_error", r
    client.ping()


def test_tool_error_abort_false_is_plain_error(client):
    def boom(args):
        raise ToolError("soft", abort=False, data={"abort": False})

    v = client.value("local ok, e = pcall(Echo.boom) return ok, e", tools=[ECHO], handlers={"Echo.boom": boom})
    assert v[0] is False and strip_lua_position(v[1]) == "Echo.boom: soft", v


def test_malformed_tool_answer_does_not_crash(client, daemon):
    i = client.send_execute("local ok, e = pcall(Echo.give) return Echo.give()", tools=[ECHO],
                            handlers={"Echo.give": lambda a: NO_REPLY})
    c = client.wait_deferred(1)
    # neither result nor error, then both: not valid responses
    client.send_raw(json.dumps({"jsonrpc": "2.0", "id": c.id}) + "\n")
    client.send_raw(json.dumps({"jsonrpc": "2.0", "id": c.id, "result": 1,
                                "error": {"code": 1, "message": "x"}}) + "\n")
    # the invalid messages may be answered with -32600 (id null or the call's id)
    deadline_calls = len(client.deferred)
    try:
        client.reply(c, "first")
    except OSError:
        pass
    try:
        c2 = client.wait_deferred(deadline_calls + 1, timeout=5 * sbx.SCALE)
        client.reply(c2, "second")
    except sbx.ReadTimeout:
        pass
    r = client.wait(i)
    assert r.ok or r.kind in ("runtime_error", "invalid_request"), r
    for extra in client.arrivals:
        assert extra.code == -32600, extra
    daemon.assert_no_leftovers()


def test_large_tool_payloads(client):
    big = "x" * 300000
    v = client.value("local r = Echo.take(string.rep('a', 300000)) return #r, r:sub(1, 3)", tools=[ECHO],
                     handlers={"Echo.take": lambda a: big + a[0]})
    assert v == [600000, "xxx"]
    assert len(client.tool_calls[0].args[0]) == 300000


def test_tool_result_type_for_empty_object_and_array(client):
    v = client.value("local a, b = Echo.give(), Echo.take() return type(a), next(a) == nil, type(b), next(b) == nil",
                     tools=[ECHO], handlers={"Echo.give": lambda a: {}, "Echo.take": lambda a: []})
    assert v == ["table", True, "table", True]


def test_tool_error_message_not_string(client):
    """An answer to a pending tool call that is not a valid JSON-RPC response
    ends the wait as a tool error (catchable), instead of leaving the chunk
    blocked until its timeout; no -32600 is sent for it."""
    i = client.send_execute("local ok, e = pcall(Echo.boom) return ok, e", tools=[ECHO],
                            handlers={"Echo.boom": lambda a: NO_REPLY})
    c = client.wait_deferred(1)
    client.send_raw(json.dumps({"jsonrpc": "2.0", "id": c.id, "error": {"code": 5, "message": 42}}) + "\n")
    r = client.wait(i)
    assert r.ok, r
    assert r.result["value"][0] is False
    assert r.result["value"][1].startswith("Echo.boom: "), r
    assert "not a valid JSON-RPC response" in r.result["value"][1]
    client.ping()
    assert all(extra.code == -32600 for extra in client.arrivals if extra.id != i), client.arrivals


def test_tool_call_from_coroutine_and_callbacks(client):
    tools = [{"name": "T", "functions": ["f"]}]
    h = {"T.f": lambda a: a[0] * 2}
    assert client.value("return coroutine.wrap(function() return T.f(21) end)()", tools=tools, handlers=h) == 42
    v = client.value("local co = coroutine.wrap(function() coroutine.yield(T.f(1)) return T.f(2) end) "
                     "return co(), co()", tools=tools, handlers=h)
    assert v == [2, 4]
    assert client.value("return (string.gsub('1 2 3', '%d', function(d) return T.f(tonumber(d)) end))",
                        tools=tools, handlers=h) == "2 4 6"
    v = client.value("local t = {3, 1, 2} table.sort(t, function(a, b) return T.f(a) < T.f(b) end) return t",
                     tools=tools, handlers=h)
    assert v == [1, 2, 3]


def test_many_tool_calls(client):
    r = client.exec_ok("local s = 0 for i = 1, 500 do s = s + T.f(i) end return s",
                       tools=[{"name": "T", "functions": ["f"]}], handlers={"T.f": lambda a: a[0]})
    assert r["value"] == 125250
    assert r["stats"]["tool_calls"] == 500


def test_tool_answer_id_with_nul_is_another_id(client):
    """Ids are compared exactly, length included: an answer whose id is the
    pending call's id followed by "\\u0000junk" answers nothing."""
    i = client.send_execute("local a = Echo.give() return a * 6", tools=[ECHO],
                            handlers={"Echo.give": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    client.send_msg({"jsonrpc": "2.0", "id": call.id + "\u0000junk", "result": 666})
    client.send_msg({"jsonrpc": "2.0", "id": call.id + "\u0000",
                     "error": {"code": 1, "message": "forged", "data": {"abort": True}}})
    client.assert_quiet_until_ping()
    client.reply(call, 7)
    r = client.wait(i)
    assert r.ok and r.result["value"] == 42, r


@pytest.mark.parametrize("tool", [
    {"name": "Echo\u0000x", "functions": ["give"]},
    {"name": "Echo", "functions": ["give\u0000x"]},
    {"name": "Echo", "functions": [{"name": "give\u0000"}]},
    {"name": "Echo", "module": "M\u0000x", "functions": ["give"]},
])
def test_tool_names_with_nul_refused(client, tool):
    """A name is used as a C string further on: one with NUL is refused, not
    cut short at the NUL."""
    r = client.execute("return 1", tools=[tool])
    assert r.kind == "invalid_params", r


def test_large_tool_answer_passes_through_unchanged(daemon_factory):
    """A large tool answer reaches the worker as the client wrote it: 16 MB
    of `0.3` is not re-encoded (it would grow five-fold, 0.3 printing as
    0.29999999999999999) nor built as a tree in the supervisor."""
    d = daemon_factory(daemon={"max_message_bytes": 16 << 20})
    c = d.client(timeout=60 * sbx.SCALE)
    n = 4000000                     # "0.3," each: 16 MB
    i = c.send_execute("local v = Echo.give() return #v, v[1], v[%d]" % n, tools=[ECHO],
                       handlers={"Echo.give": lambda a: NO_REPLY},
                       limits={"max_heap": 400000000}, timeout_ms=100000)
    call = c.wait_deferred(1)
    c.send_raw(b'{"jsonrpc":"2.0","id":"%s","result":[%s]}\n'
               % (call.id.encode(), b",".join([b"0.3"] * n)))
    r = c.wait(i)
    assert r.ok, r
    assert r.result["value"] == [n, 0.3, 0.3], r.result["value"]



def test_maximal_tool_list_is_checked_to_its_last_name(client):
    """256 tools of 256 functions each (the documented maxima) are taken
    whole, the last function of the last tool callable; the same list with
    its very last name forbidden is refused by that name, so every check
    ran.  What the checks cost is counted, not timed, by
    tests/unit/test_tools.c (test_duplicate_checks_are_linear: one probe per
    name, where a scan of the entries so far makes 128 times as many)."""
    tools = [{"name": "T%d" % i, "functions": ["f%d" % j for j in range(256)]}
             for i in range(256)]
    assert client.value("return T255.f255(7)", tools=tools,
                        handlers={"T255.f255": lambda a: a[0] * 6}) == 42
    tools[-1]["functions"][-1] = "__module"
    r = client.execute("return 1", tools=tools)
    assert r.kind == "invalid_params" and "__module" in r.message, r
