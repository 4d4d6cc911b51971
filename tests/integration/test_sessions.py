"""Sessions (docs/protocol.md §3.8): one worker and one Lua state kept alive
between chunks; per-chunk limits, max_heap for the whole state; the
end-of-session rules; snapshot, close, idle timeout, max_sessions; sessions
belong to their connection."""

import os
import time

import pytest

import sbx
from sbx import NO_REPLY, ToolError

T = {"name": "T", "functions": ["f"]}


def open_session(c, **params):
    r = c.call("session/open", params)
    assert r.ok, r
    sid = r.result["session"]
    assert isinstance(sid, str) and sid
    return sid


def chunk(c, sid, code, **kw):
    return c.execute(code, session=sid, **kw)


def chunk_ok(c, sid, code, **kw):
    r = chunk(c, sid, code, **kw)
    assert r.ok, "chunk %r failed: %r" % (code[:200], r)
    return r.result


def assert_closed(c, sid):
    r = chunk(c, sid, "return 1")
    assert r.kind == "session_not_found" and r.code == -32013, r


def state(daemon):
    with daemon.client() as c:
        return c.call("describe").result["state"]


def wait_state(daemon, key, want):
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        st = state(daemon)
        if st[key] == want:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


# ------------------------------------------------------------------ state kept

def test_functions_closures_metatables_coroutines_survive(client):
    sid = open_session(client)
    chunk_ok(client, sid, """
        function square(x) return x * x end
        local hidden = 10
        function bump() hidden = hidden + 1 return hidden end
        Vec = setmetatable({}, {__index = {len = function(v) return #v.items end}})
        Vec.items = {1, 2, 3}
        gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
        getmetatable('').__index.shout = function(s) return s:upper() .. '!' end
        return gen()
    """)
    r = chunk_ok(client, sid, "return square(7), bump(), bump(), Vec:len(), gen(), gen(), ('hi'):shout()")
    assert r["value"] == [49, 11, 12, 3, 2, 3, "HI!"]
    assert "bindings" not in r and "binding_names" not in r
    client.call("session/close", {"session": sid})


def test_locals_end_with_their_chunk(client):
    sid = open_session(client)
    chunk_ok(client, sid, "local x = 1 y = 2")
    assert chunk_ok(client, sid, "return x, y")["value"] == [None, 2]


def test_open_with_tools_and_bindings(client):
    sid = open_session(client, tools=[T], bindings=[["start", 40]])
    client.default_handlers = {"T.f": lambda a: a[0] + 1}
    assert chunk_ok(client, sid, "return T.f(start)")["value"] == 41
    assert chunk_ok(client, sid, "return T.__module, type(T.f)")["value"] == ["T", "function"]


def test_return_bindings_and_snapshot(client):
    sid = open_session(client)
    r = chunk_ok(client, sid, "a = 1 b = {x = 1.5} function f() end", return_bindings=True)
    assert r["binding_names"] == ["a", "b"]
    snap = client.call("session/snapshot", {"session": sid})
    assert snap.ok, snap
    assert snap.result["binding_names"] == ["a", "b"]
    assert snap.result["bindings"] == r["bindings"]
    # restore into a new session and into a stateless execute
    sid2 = open_session(client, bindings=snap.result["bindings"])
    assert chunk_ok(client, sid2, "return a, b.x, math.type(b.x), f")["value"] == [1, 1.5, "float", None]
    assert client.value("return a + 1, b.x", bindings=snap.result["bindings"]) == [2, 1.5]


def test_stream_and_parallel_in_a_session(client):
    sid = open_session(client, tools=[T])
    i = client.send_execute("print('x') return parallel(function() return T.f(1) end,"
                            " function() return T.f(2) end)",
                            session=sid, stream_output=True, handlers={"T.f": lambda a: NO_REPLY})
    calls = [client.wait_deferred(1), client.wait_deferred(2)]
    for call in reversed(calls):
        client.reply(call, result=call.args[0] * 10)
    r = client.wait(i)
    assert r.ok and r.result["value"] == [10, 20], r
    assert client.output_notes(i) == ["x\n"]
    assert chunk_ok(client, sid, "return 1")["value"] == 1


# ------------------------------------------------------------------ end-of-session rules

def test_syntax_error_keeps_the_session(client):
    sid = open_session(client)
    chunk_ok(client, sid, "kept = 'yes'")
    r = chunk(client, sid, "return 1 +")
    assert r.kind == "syntax_error" and r.data["session_closed"] is False, r
    assert chunk_ok(client, sid, "return kept")["value"] == "yes"
    # the note's trial compilations leave the session's state alone
    chunk_ok(client, sid, "function twice(n) return 2 * n end")
    r = chunk(client, sid, "local y = twice(4)\ny")
    assert r.kind == "syntax_error" and "bare expression" in r.message, r
    assert chunk_ok(client, sid, "return twice(21), kept")["value"] == [42, "yes"]


def test_runtime_error_keeps_the_state_as_left(client):
    sid = open_session(client)
    r = chunk(client, sid, "before = 1 error('boom') after = 2")
    assert r.kind == "runtime_error" and r.data["session_closed"] is False, r
    assert chunk_ok(client, sid, "return before, after")["value"] == [1, None]


@pytest.mark.parametrize("code,kw,kind", [
    ("while true do end", {"timeout_ms": 300}, "timeout"),
    ("local t = {} for i = 1, 1e9 do t[i] = {i} end", {"limits": {"max_heap": 16000000}},
     "memory_limit"),
    ("while true do end", {"limits": {"max_reductions": 100000}}, "reductions_limit"),
    ("while true do end", {"limits": {"cpu_ms": 200}}, "cpu_limit"),
    ("for i = 1, 5 do pcall(T.f, i) end", {"limits": {"max_tool_calls": 2}}, "tool_call_limit"),
], ids=["timeout", "memory", "reductions", "cpu", "tool_calls"])
def test_a_limit_ends_the_session(client, code, kw, kind):
    sid = open_session(client, tools=[T], limits={"max_heap": 64000000})
    client.default_handlers = {"T.f": lambda a: a[0]}
    chunk_ok(client, sid, "x = 1")
    r = chunk(client, sid, code, **kw)
    assert r.kind == kind, r
    assert r.data["session_closed"] is True, r
    assert_closed(client, sid)


def test_tool_abort_ends_the_session(client):
    sid = open_session(client, tools=[T])

    def f(a):
        raise ToolError("stop", abort=True)
    r = chunk(client, sid, "return pcall(T.f, 1)", handlers={"T.f": f})
    assert r.kind == "tool_aborted" and r.data["session_closed"] is True, r
    assert_closed(client, sid)


def test_cancel_ends_the_session(client):
    sid = open_session(client)
    i = client.send_execute("while true do end", session=sid)
    time.sleep(0.1)
    client.cancel(i)
    r = client.wait(i)
    assert r.kind == "cancelled" and r.data["session_closed"] is True, r
    assert_closed(client, sid)


def test_one_chunk_at_a_time(client):
    sid = open_session(client, tools=[T])
    i = client.send_execute("return T.f(1)", session=sid, handlers={"T.f": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    r = chunk(client, sid, "return 2")
    assert r.kind == "busy" and r.code == -32009, r
    r = client.call("session/snapshot", {"session": sid})
    assert r.kind == "busy", r
    client.reply(call, result=5)
    assert client.wait(i).result["value"] == 5
    assert chunk_ok(client, sid, "return 2")["value"] == 2


def test_close_answers_after_the_worker_is_gone(daemon):
    # the sessions of the tests before on this daemon end with their
    # connections, which it handles when it reads their ends: gone first
    wait_state(daemon, "sessions", 0)
    with daemon.client() as c:
        before = state(daemon)["workers"]
        sid = open_session(c)
        assert state(daemon)["sessions"] == 1
        r = c.call("session/close", {"session": sid})
        assert r.ok and r.result == {}, r
        st = state(daemon)
        assert st["sessions"] == 0 and st["workers"] <= before, st
        assert_closed(c, sid)
        r = c.call("session/close", {"session": sid})
        assert r.kind == "session_not_found", r


def test_close_while_a_chunk_runs(client):
    sid = open_session(client)
    i = client.send_execute("while true do end", session=sid)
    time.sleep(0.1)
    r = client.call("session/close", {"session": sid})
    assert r.ok, r
    r = client.wait(i)
    assert r.kind == "cancelled" and r.data["session_closed"] is True, r


def test_idle_timeout_closes(daemon):
    with daemon.client() as c:
        sid = open_session(c, idle_timeout_ms=300)
        chunk_ok(c, sid, "x = 1")
        time.sleep(0.15)
        chunk_ok(c, sid, "x = 2")       # a chunk restarts the idle clock
        time.sleep(0.8 * sbx.SCALE)
        assert_closed(c, sid)
    wait_state(daemon, "sessions", 0)


def test_idle_timeout_default_and_bad_values(client):
    for bad in (0, -1, 1.5, "10", 86400001):
        r = client.call("session/open", {"idle_timeout_ms": bad})
        assert r.kind == "invalid_params", (bad, r)


def test_max_sessions(daemon_factory):
    d = daemon_factory(daemon={"max_sessions": 2})
    with d.client() as c:
        a, b = open_session(c), open_session(c)
        r = c.call("session/open", {})
        assert r.kind == "busy" and r.data["max_sessions"] == 2, r
        assert c.call("describe").result["daemon"]["max_sessions"] == 2
        c.call("session/close", {"session": a})
        open_session(c)
        assert c.call("describe").result["state"]["sessions"] == 2


def test_max_sessions_per_connection(daemon_factory):
    """One connection's share of max_sessions: it may hold exactly
    max_sessions_per_connection sessions (each with a day's idle timeout),
    the next is busy, and other connections still open theirs; a close
    gives the share back."""
    d = daemon_factory(daemon={"max_sessions": 5, "max_sessions_per_connection": 2})
    day = 86400000
    with d.client() as a, d.client() as b, d.client() as c:
        a1 = open_session(a, idle_timeout_ms=day)
        open_session(a, idle_timeout_ms=day)
        r = a.call("session/open", {"idle_timeout_ms": day})
        assert r.kind == "busy" and r.data["max_sessions_per_connection"] == 2, r
        assert "max_sessions_per_connection 2" in r.message, r
        open_session(b, idle_timeout_ms=day)
        open_session(b, idle_timeout_ms=day)
        c1 = open_session(c)
        assert chunk_ok(c, c1, "return 5")["value"] == 5
        r = c.call("session/open", {})          # the global cap: 5 open
        assert r.kind == "busy" and r.data["max_sessions"] == 5, r
        a.call("session/close", {"session": a1})
        open_session(a)
        assert c.call("describe").result["state"]["sessions"] == 5


def test_sessions_off(daemon_factory):
    d = daemon_factory(daemon={"max_sessions": 0})
    with d.client() as c:
        assert c.call("session/open", {}).kind == "busy"


def test_another_connections_session_id(daemon):
    with daemon.client() as a, daemon.client() as b:
        sid = open_session(a)
        assert chunk(b, sid, "return 1").kind == "session_not_found"
        assert b.call("session/snapshot", {"session": sid}).kind == "session_not_found"
        assert b.call("session/close", {"session": sid}).kind == "session_not_found"
        assert chunk_ok(a, sid, "return 1")["value"] == 1


def test_disconnect_closes_sessions(daemon):
    wait_state(daemon, "sessions", 0)       # none left by the tests before
    c = daemon.client()
    sid = open_session(c)
    open_session(c)
    chunk_ok(c, sid, "x = 1")
    assert state(daemon)["sessions"] == 2
    c.close()
    wait_state(daemon, "sessions", 0)
    wait_state(daemon, "workers", 0)


def test_bad_session_params(client):
    sid = open_session(client)
    for params in ({"session": 5}, {"session": sid, "tools": [T]},
                   {"session": sid, "bindings": [["a", 1]]}, {"session": sid, "return_bindings": 1}):
        params["code"] = "return 1"
        r = client.call("execute", params)
        assert r.kind in ("invalid_params", "session_not_found"), (params, r)
        assert r.kind == "invalid_params" or params["session"] == 5
    assert chunk(client, "nope", "return 1").kind == "session_not_found"
    assert client.call("session/snapshot", {}).kind == "invalid_params"


# ------------------------------------------------------------------ limits per chunk

def test_chunk_limits_narrow_only(client):
    sid = open_session(client, timeout_ms=5000, limits={"max_reductions": 1000000})
    r = chunk(client, sid, "return 1", timeout_ms=6000)
    assert r.kind == "limit_out_of_range", r
    r = chunk(client, sid, "return 1", limits={"max_reductions": 2000000})
    assert r.kind == "limit_out_of_range", r
    r = chunk(client, sid, "while true do end", limits={"max_reductions": 50000})
    assert r.kind == "reductions_limit", r


def test_reductions_and_tool_calls_count_per_chunk(client):
    sid = open_session(client, tools=[T], limits={"max_reductions": 3000000, "max_tool_calls": 3})
    client.default_handlers = {"T.f": lambda a: 1}
    for _ in range(4):      # together far beyond either budget
        r = chunk_ok(client, sid, "for i = 1, 300000 do end for i = 1, 3 do T.f(i) end return 1")
        assert r["stats"]["tool_calls"] == 3


def test_cpu_counts_per_chunk(client):
    # each chunk uses about 60% of cpu_ms: together they use several times it
    sid = open_session(client, limits={"cpu_ms": 400}, timeout_ms=20000 * sbx.SCALE)
    for _ in range(4):
        r = chunk(client, sid, "local t = os.clock() while os.clock() - t < 0.25 do end return 1")
        assert r.ok, r
        assert r.result["stats"]["cpu_us"] < 400000, r


def test_cpu_backstop_does_not_accumulate(client):
    # cpu_ms 1500: the kernel's RLIMIT_CPU backstop is 1500/1000 + 2 = 3 s of
    # CPU; three chunks of 1.2 s pass it together but never one alone
    sid = open_session(client, limits={"cpu_ms": 1500}, timeout_ms=60000 * sbx.SCALE)
    for _ in range(3):
        r = chunk(client, sid, "local t = os.clock() while os.clock() - t < 1.2 do end return 1")
        assert r.ok, r


def test_output_per_chunk(client):
    sid = open_session(client, limits={"max_output_bytes": 10})
    for _ in range(3):
        r = chunk_ok(client, sid, "print('12345678')")
        assert r["output"] == "12345678\n" and r["output_truncated"] is False


def test_heap_bounds_the_whole_state(client):
    # each chunk keeps about 4 MB; one alone fits easily, four do not
    fill = "keep%d = {} for i = 1, 250000 do keep%d[i] = i end"
    r = chunk(client, open_session(client, limits={"max_heap": 16000000}), fill % (0, 0))
    assert r.ok, r
    sid = open_session(client, limits={"max_heap": 16000000})
    for k in range(10):
        r = chunk(client, sid, fill % (k, k))
        if not r.ok:
            break
    assert k >= 2, "the heap was not shared by the chunks: %d" % k
    assert k < 5, "the heap was counted per chunk, not for the state"
    assert r.kind == "memory_limit" and r.data["session_closed"] is True, r
    assert_closed(client, sid)


def test_old_coroutine_billed_under_a_later_budget(daemon_factory):
    d = daemon_factory(defaults={"max_reductions": "infinity", "cpu_ms": "infinity"},
                       ceilings={"max_reductions": "infinity", "cpu_ms": "infinity"})
    with d.client() as c:
        sid = open_session(c)
        chunk_ok(c, sid, "spin = coroutine.wrap(function() while true do end end)")
        r = chunk(c, sid, "spin()", limits={"max_reductions": 100000}, timeout_ms=5000 * sbx.SCALE)
        assert r.kind == "reductions_limit", r


# ------------------------------------------------------------------ describe, prompt_info

def test_describe_sessions(client):
    d = client.call("describe").result
    assert "sessions" in d["features"]
    for m in ("session/open", "session/snapshot", "session/close"):
        assert m in d["methods"]
    assert isinstance(d["state"]["sessions"], int)
    assert d["daemon"]["session_idle_timeout_ms"] >= 1


def test_prompt_info_session_mode(client):
    plain = client.call("prompt_info").result
    sess = client.call("prompt_info", {"session": True}).result
    assert plain["language"] == sess["language"] == "Lua 5.3"
    assert "This is a session" in sess["constraints"]
    assert "functions" in sess["constraints"] and "metatables" in sess["constraints"]
    assert "This is a session" not in plain["constraints"]
    assert "parallel(" in plain["constraints"] and "parallel(" in sess["constraints"]


def test_stop_does_not_wait_for_idle_sessions(daemon_factory):
    """SIGTERM ends idle sessions at once: they are not running executions,
    so the shutdown grace period is not spent waiting for them."""
    import signal
    import subprocess
    # a grace of a day, the most the config takes: a daemon that waited for
    # the idle session would still be running when the safety net (minutes,
    # never reached by one that does not) runs out
    d = daemon_factory(daemon={"shutdown_grace_ms": 86400000})
    c = d.client()
    sid = open_session(c)
    chunk_ok(c, sid, "x = 1")
    os.kill(d.pid, signal.SIGTERM)
    try:
        d.proc.wait(120 * sbx.SCALE)
    except subprocess.TimeoutExpired:
        raise AssertionError("the daemon waited for an idle session")
    assert d.proc.returncode == 0


def test_snapshot_over_max_bindings_bytes_keeps_the_session(client):
    """session/snapshot is a read-only checkpoint: globals over the
    session's max_bindings_bytes give bindings_too_large with
    session_closed false, and the session goes on with its state whole
    (closures included); once they fit, the same snapshot works."""
    sid = open_session(client, limits={"max_bindings_bytes": 1000})
    chunk_ok(client, sid, "big = string.rep('x', 5000) n = 0 function inc() n = n + 1 return n end")
    for _ in range(2):
        r = client.call("session/snapshot", {"session": sid})
        assert r.kind == "bindings_too_large", r
        assert r.data["session_closed"] is False, r
        assert "(1000 bytes)" in r.message, r
    assert chunk_ok(client, sid, "return #big, inc(), inc()")["value"] == [5000, 1, 2]
    chunk_ok(client, sid, "big = string.rep('y', 900)")
    r = client.call("session/snapshot", {"session": sid})
    assert r.ok and r.result["binding_names"] == ["big", "n"], r
    # a chunk over the limit with return_bindings still ends the session
    chunk_ok(client, sid, "big = string.rep('z', 5000)")
    r = chunk(client, sid, "return 1", return_bindings=True)
    assert r.kind == "bindings_too_large" and r.data["session_closed"] is True, r
    assert_closed(client, sid)
