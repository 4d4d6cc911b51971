"""Attacks on the version 1.1 features (docs/protocol.md §3, §3.8, §10):
sessions, parallel(), stream_output, max_tool_calls and the stock string
metatable, played as a hostile chunk and a hostile client against the real
daemon.  Each test states the attack and what must hold."""

import json
import os
import signal
import time

import pytest

import sbx
from conftest import merge_config
from sbx import NO_REPLY, ToolError

T = {"name": "T", "functions": ["f", "g"]}


def open_session(c, **params):
    r = c.call("session/open", params)
    assert r.ok, r
    return r.result["session"]


def chunk(c, sid, code, **kw):
    return c.execute(code, session=sid, **kw)


def chunk_ok(c, sid, code, **kw):
    r = chunk(c, sid, code, **kw)
    assert r.ok, "chunk %r failed: %r" % (code[:200], r)
    return r.result


def assert_closed(c, sid):
    r = chunk(c, sid, "return 1")
    assert r.kind == "session_not_found", r


def state(daemon):
    with daemon.client() as c:
        return c.call("describe").result["state"]


def wait_state(daemon, key, want):
    deadline = time.monotonic() + 5 * sbx.SCALE
    while True:
        st = state(daemon)
        if st[key] == want:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


# ------------------------------------------------------- the string metatable

# Every metamethod a string can have, each an endless loop: if any C code of
# the worker read a string through the metatable after the chunk's limits
# were lifted (encoding results, bindings, snapshots, error messages,
# tracebacks, tool arguments), the chunk would never end.
POISON = """
local mt = getmetatable("")
local function spin() while true do end end
for _, k in ipairs({"__index", "__newindex", "__tostring", "__concat", "__len", "__eq",
                    "__lt", "__le", "__call", "__name", "__pairs", "__close", "__unm",
                    "__add", "__mode"}) do
  mt[k] = spin
end
mt.__metatable = "locked"
"""


def test_poisoned_string_metatable_in_a_session(client):
    sid = open_session(client, tools=[T], limits={"max_reductions": 2000000},
                       timeout_ms=10000 * sbx.SCALE)
    chunk_ok(client, sid, POISON)
    client.default_handlers = {"T.f": lambda a: a}
    # results with string keys and values, several values, nested tables
    r = chunk_ok(client, sid, "s = 'kept' t = {a = 'x', [1] = 'y', b = {c = 'z'}} "
                              "return 'str', t, #'abc'", return_bindings=True)
    assert r["value"] == ["str", {"1": "y", "a": "x", "b": {"c": "z"}}, 3], r
    assert set(r["binding_names"]) >= {"s", "t"}
    # a tool call with string arguments and a string answer
    assert chunk_ok(client, sid, "return T.f('arg', {k = 'v'})")["value"] == ["arg", {"k": "v"}]
    # a string error, an error with a string-keyed table, a syntax error
    r = chunk(client, sid, "error('boom')")
    assert r.kind == "runtime_error" and "boom" in r.message, r
    r = chunk(client, sid, "error({msg = 'x'})")
    assert r.kind == "runtime_error", r
    r = chunk(client, sid, "return 'unclosed")
    assert r.kind == "syntax_error", r
    # a snapshot reads the globals raw
    snap = client.call("session/snapshot", {"session": sid})
    assert snap.ok and set(snap.result["binding_names"]) >= {"s", "t"}, snap
    # the metatable is still the chunk's own (it stays changed in its session)
    assert chunk_ok(client, sid, "return getmetatable('')")["value"] == "locked"
    # a print of a string goes through tostring, which runs the chunk's
    # __tostring under the chunk's limits: a limit, not a hang
    r = chunk(client, sid, "print('x')")
    assert r.kind in ("reductions_limit", "runtime_error"), r
    client.default_handlers = None


def test_poisoned_string_metatable_stateless_results(client):
    r = client.execute(POISON + "s = 'g' return 'a', {b = 'c'}")
    assert r.ok, r
    assert r.result["value"] == ["a", {"b": "c"}]
    assert r.result["binding_names"] == ["s"]
    r = client.execute(POISON + "local x = nil; return x.field")
    assert r.kind == "runtime_error", r


def test_string_metatable_does_not_reach_the_next_session(client):
    a = open_session(client)
    chunk_ok(client, a, "getmetatable('').__index = function() return 'evil' end")
    assert chunk_ok(client, a, "return ('x').upper")["value"] == "evil"
    b = open_session(client)
    assert chunk_ok(client, b, "return ('x'):upper()")["value"] == "X"
    assert client.value("return ('x'):upper()") == "X"


# ---------------------------------------------------------------- parallel

def test_more_branches_than_max_parallel_calls_nested(daemon_factory):
    d = daemon_factory(daemon={"max_parallel_calls": 2})
    with d.client() as c:
        out = []

        def f(args):
            out.append(args[0])
            return args[0] * 2
        code = """
        local fs = {}
        for i = 1, 9 do
          fs[i] = function()
            if i % 3 == 0 then
              return parallel(function() return T.f(i * 100) end,
                              function() return T.f(i * 100 + 1) end)
            end
            return T.f(i)
          end
        end
        return parallel(table.unpack(fs))
        """
        r = c.execute(code, tools=[T], handlers={"T.f": f})
        assert r.ok, r
        assert r.result["value"] == [2, 4, 600, 8, 10, 1200, 14, 16, 1800]
        assert r.result["stats"]["tool_calls"] == 12


def test_parallel_in_wrap_and_in_error_handlers(client):
    code = """
    local w = coroutine.wrap(function()
      return parallel(function() return T.f(1) end, function() return T.f(2) end)
    end)
    local a, b = w()
    local ok, e = xpcall(function() return T.g() end, function(m)
      return parallel(function() return T.f(3) end)
    end)
    local ok2, e2 = pcall(T.g)
    local p = {pcall(parallel, function() return T.f(4) end, function() error('br') end)}
    return {a, b, ok, e, ok2, p[1]}
    """
    def g(args):
        raise ToolError("no")
    r = client.execute(code, tools=[T], handlers={"T.f": lambda a: a[0], "T.g": g})
    assert r.ok, r
    v = r.result["value"]
    assert v[:3] == [1, 2, False] and v[4] is False and v[5] is False, v


@pytest.mark.parametrize("body", [
    "while true do end",
    "local t = {} while true do t[#t + 1] = ('x'):rep(1000) end",
])
def test_branch_limit_with_calls_outstanding_is_fatal(client, body):
    code = """
    local ok = pcall(parallel, function() return T.f(1) end,
                     function() %s end,
                     function() return pcall(T.f, 2) end)
    return 'escaped', ok
    """ % body
    i = client.send_execute(code, tools=[T], limits={"max_reductions": 3000000,
                                                    "max_heap": 16000000},
                            handlers={"T.f": lambda a: NO_REPLY})
    r = client.wait(i)
    assert r.kind in ("reductions_limit", "memory_limit"), r
    for call in client.deferred:
        client.reply(call, result=1)    # to a finished execution
    client.ping()


def test_branch_own_yield_with_calls_outstanding(client):
    code = """
    local ok, e = pcall(parallel, function() return T.f(1) end,
                        function() coroutine.yield() while true do end end)
    return ok, e
    """
    i = client.send_execute(code, tools=[T], limits={"max_reductions": 3000000},
                            handlers={"T.f": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    client.reply(call, result=1)
    r = client.wait(i)
    assert r.ok and r.result["value"][0] is False, r
    assert "yielded outside a tool call" in r.result["value"][1], r


def test_answers_duplicated_unknown_and_of_another_execution(client):
    tools = [T]
    i = client.send_execute("return parallel(function() return T.f(1) end,"
                            "                function() return T.f(2) end)",
                            tools=tools, handlers={"T.f": lambda a: NO_REPLY})
    j = client.send_execute("return T.f(3)", tools=tools,
                            handlers={"T.f": lambda a: NO_REPLY})
    calls = [client.wait_deferred(k) for k in (1, 2, 3)]
    by_exec = {}
    for call in calls:
        by_exec.setdefault(call.execution_id, []).append(call)
    ci, cj = by_exec[i], by_exec[j]
    # never made, forged with a NUL, and numbered past the real ones
    for bogus in ("sbx-999999-1", ci[0].id + "\u0000", ci[0].id + "0", 17, None,
                  ci[0].id.rsplit("-", 1)[0] + "-9"):
        client.send_msg({"jsonrpc": "2.0", "id": bogus, "result": "forged"})
    client.reply(ci[0], result="a")
    client.reply(ci[0], result="dup")               # answered already
    client.reply(ci[0], error={"code": 1, "message": "late", "data": {"abort": True}})
    client.reply(cj[0], result="j")
    client.reply(cj[0], result="j-dup")
    client.reply(ci[1], result="b")
    ri, rj = client.wait(i), client.wait(j)
    assert ri.ok and rj.ok, (ri, rj)
    assert sorted(ri.result["value"], key=str) == ["a", "b"] or ri.result["value"] in (
        ["a", "b"], ["b", "a"])
    assert rj.result["value"] == "j"
    # answers after the end, and after a cancel
    client.reply(ci[1], result="after")
    k = client.send_execute("return T.f(4)", tools=tools, handlers={"T.f": lambda a: NO_REPLY})
    ck = client.wait_deferred(4)
    client.cancel(k)
    r = client.wait(k)
    assert r.kind == "cancelled", r
    client.reply(ck, result="after cancel")
    client.ping()


def test_tool_call_budget_exact_under_parallel(client):
    par = "return parallel(" + ",".join("function() return T.f(%d) end" % n
                                        for n in range(1, 6)) + ")"
    r = client.execute(par, tools=[T], limits={"max_tool_calls": 5},
                       handlers={"T.f": lambda a: a[0]})
    assert r.ok and r.result["value"] == [1, 2, 3, 4, 5], r
    caught = "local ok = pcall(function() %s end) return 'escaped', ok" % par
    r = client.execute(caught, tools=[T], limits={"max_tool_calls": 4},
                       handlers={"T.f": lambda a: a[0]})
    assert r.kind == "tool_call_limit", r
    assert r.data["stats"]["tool_calls"] == 4, r


def test_tool_call_budget_under_parallel_with_calls_held(client):
    # the call past the budget ends the execution while the others wait
    code = ("local ok = pcall(parallel, function() return T.f(1) end,"
            " function() return T.f(2) end, function() return T.f(3) end) return ok")
    i = client.send_execute(code, tools=[T], limits={"max_tool_calls": 2},
                            handlers={"T.f": lambda a: NO_REPLY})
    r = client.wait(i)
    assert r.kind == "tool_call_limit", r
    for call in client.deferred:
        client.reply(call, result=0)      # answers to a finished execution
    client.ping()


# ------------------------------------------------------------- stream_output

@pytest.mark.parametrize("cap", [1, 7, 8, 65535, 65536, 65537])
def test_stream_at_the_output_cap_with_invalid_utf8(client, cap):
    code = ("for i = 1, 40 do io = nil print(('\\xff\\xe2\\x82'):rep(700) .. '\\u{20ac}x') end "
            "print(('y'):rep(70000)) return 1")
    r = client.execute(code, limits={"max_output_bytes": cap}, stream_output=True)
    assert r.ok, r
    out = r.result["output"]
    assert r.result["output_truncated"] is True
    assert "".join(client.output_notes(r.id)) == out
    assert len(out.encode("utf-8", "surrogatepass")) <= cap * 3


def test_stream_prints_between_tool_calls_in_order(client):
    code = "for i = 1, 5 do print('p' .. i) T.f(i) end print('end') return 1"
    order = []

    def f(args):
        order.append(("call", args[0], "".join(client.output_notes(i))))
        return 0
    i = client.send_execute(code, tools=[T], handlers={"T.f": f}, stream_output=True)
    r = client.wait(i)
    assert r.ok, r
    for n, (_, k, seen) in enumerate(order, 1):
        assert seen == "".join("p%d\n" % m for m in range(1, n + 1)), order
    assert "".join(client.output_notes(i)) == r.result["output"]


def test_stream_cancel_mid_stream_with_slow_reader(daemon):
    c = daemon.client()
    i = c.send_execute("while true do print(('z'):rep(1000)) end", stream_output=True,
                       limits={"max_output_bytes": 8 << 20})
    time.sleep(0.5 * sbx.SCALE)       # reading nothing meanwhile
    c.cancel(i)
    r = c.wait(i, timeout=20 * sbx.SCALE)
    assert r.kind == "cancelled", r
    assert "".join(c.output_notes(i)) == r.data["output"]
    c.ping()
    c.close()
    daemon.assert_no_leftovers()


# ---------------------------------------------------------------- sessions

def test_session_id_guessed_and_reused(daemon):
    with daemon.client() as a, daemon.client() as b:
        sid = open_session(a)
        n = int(sid.rsplit("-", 1)[1])
        for guess in [sid, "ses-%d" % (n + 1), "ses-%d" % (n - 1), sid + "\u0000", sid.upper(),
                      " " + sid, n, [sid], {"id": sid}]:
            r = chunk(b, guess, "return 1")
            assert r.kind in ("session_not_found", "invalid_params"), (guess, r)
        a.call("session/close", {"session": sid})
        assert_closed(a, sid)
        sid2 = open_session(a)
        assert sid2 != sid


def test_snapshot_close_and_chunk_while_a_chunk_waits(client):
    sid = open_session(client, tools=[T])
    i = client.send_execute("x = 1 return T.f()", session=sid,
                            handlers={"T.f": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    assert client.call("session/snapshot", {"session": sid}).kind == "busy"
    assert chunk(client, sid, "return 2").kind == "busy"
    r = client.call("session/close", {"session": sid})
    assert r.ok, r
    ri = client.wait(i)
    assert ri.kind == "cancelled" and ri.data["session_closed"] is True, ri
    client.reply(call, result=1)       # to a closed session
    assert client.call("session/close", {"session": sid}).kind == "session_not_found"
    client.ping()


def test_two_closes_in_one_write(daemon):
    with daemon.client() as c:
        sid = open_session(c)
        msgs = [{"jsonrpc": "2.0", "id": k, "method": "session/close", "params": {"session": sid}}
                for k in (101, 102)]
        msgs.insert(1, {"jsonrpc": "2.0", "id": 103, "method": "execute",
                        "params": {"session": sid, "code": "return 1"}})
        c.send_raw("".join(json.dumps(m) + "\n" for m in msgs))
        r1, r2, r3 = c.wait(101), c.wait(102), c.wait(103)
        assert r1.ok, r1
        assert r2.kind == "session_not_found", r2
        assert r3.kind == "session_not_found", r3
    wait_state(daemon, "sessions", 0)


def test_max_sessions_freed_by_closing_connections(daemon_factory):
    d = daemon_factory(daemon={"max_sessions": 2})
    for _ in range(4):
        cs = [d.client(), d.client()]
        for c in cs:
            open_session(c)
        with d.client() as x:
            assert x.call("session/open", {}).kind == "busy"
        for c in cs:
            c.close()
        wait_state(d, "sessions", 0)
    d.assert_no_leftovers()


def session_worker(daemon, before):
    pids = set(daemon.wait_for_workers(len(before) + 1)) - before
    assert len(pids) == 1, pids
    return pids.pop()


def test_session_worker_killed_between_chunks(daemon):
    with daemon.client() as c:
        before = set(daemon.worker_pids())
        sid = open_session(c)
        chunk_ok(c, sid, "x = 1")
        pid = session_worker(daemon, before)
        os.kill(pid, signal.SIGKILL)
        daemon.wait_log("session %s: its worker died between chunks" % sid)
        assert_closed(c, sid)
        assert c.call("session/snapshot", {"session": sid}).kind == "session_not_found"
    wait_state(daemon, "sessions", 0)


def test_session_worker_stopped_between_chunks(daemon):
    with daemon.client() as c:
        before = set(daemon.worker_pids())
        sid = open_session(c)
        chunk_ok(c, sid, "x = 1")
        pid = session_worker(daemon, before)
        os.kill(pid, signal.SIGSTOP)
        try:
            r = chunk(c, sid, "return x", timeout_ms=int(500 * sbx.SCALE))
            assert r.kind == "timeout" and r.data["session_closed"] is True, r
            assert_closed(c, sid)
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    wait_state(daemon, "sessions", 0)
    daemon.assert_no_leftovers()


def test_idle_timeout_racing_chunks(daemon):
    with daemon.client() as c:
        for _ in range(10):
            sid = open_session(c, idle_timeout_ms=50)
            time.sleep(0.045)
            r = chunk(c, sid, "return 1")
            assert r.ok or r.kind == "session_not_found", r
    wait_state(daemon, "sessions", 0)


def test_refused_chunks_leave_the_session_usable(client):
    sid = open_session(client, limits={"max_heap": 32 << 20, "max_reductions": 5000000})
    chunk_ok(client, sid, "keep = ('k'):rep(1 << 20)")
    for params in ({"limits": {"max_heap": 64 << 20}}, {"limits": {"max_reductions": "infinity"}},
                   {"tools": [T]}, {"bindings": []}, {"timeout_ms": -1},
                   {"limits": {"max_tool_calls": -1}}):
        r = chunk(client, sid, "big = ('x'):rep(40 << 20)", **params)
        assert not r.ok and r.kind in ("invalid_params", "limit_out_of_range"), (params, r)
    for _ in range(5):
        assert chunk_ok(client, sid, "return #keep")["value"] == 1 << 20


def test_caught_errors_per_chunk_do_not_accumulate(client):
    # a session whose every chunk raises and catches many errors, and leaves a
    # suspended coroutine behind, lives as long as each chunk fits
    sid = open_session(client, limits={"max_reductions": 400000})
    for n in range(8):
        chunk_ok(client, sid, """
          for i = 1, 2000 do pcall(error, i) end
          cos = cos or {}
          cos[#cos + 1] = coroutine.create(function() while true do coroutine.yield() end end)
          coroutine.resume(cos[#cos])
          return #cos""")
    r = chunk(client, sid, "for _, co in ipairs(cos) do for i = 1, 1e9 do "
                           "coroutine.resume(co) end end")
    assert r.kind == "reductions_limit" and r.data["session_closed"] is True, r


def test_limit_inside_hook_like_places_ends_the_session(client):
    # the limit is hit inside a metamethod, inside a coroutine, under pcall,
    # in a chunk after a chunk that left all of these set up
    sid = open_session(client, limits={"max_reductions": 1000000})
    chunk_ok(client, sid, """
      mt = setmetatable({}, {__index = function(t, k) while true do end end})
      co = coroutine.wrap(function() local _ = mt.x end)
    """)
    r = chunk(client, sid, "local ok = pcall(co) return 'escaped', ok")
    assert r.kind == "reductions_limit" and r.data["session_closed"] is True, r
    assert_closed(client, sid)


# ------------------------------------------------- a compromised session worker

# The test plays the worker: it stops the real one and takes a duplicate of
# its channel end (pidfd_getfd, which needs the ptrace permission root has),
# then writes frames of its choosing to the supervisor.

SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
CHAN_OUTPUT, CHAN_TOOL_CALL, CHAN_RESULT, CHAN_ERROR = 16, 17, 18, 19


def steal_channel(pid):
    import ctypes
    import socket
    if os.geteuid() != 0 or os.uname().machine != "x86_64":
        pytest.skip("needs root and x86_64 syscall numbers")
    libc = ctypes.CDLL(None, use_errno=True)
    pfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pfd < 0:
        pytest.skip("pidfd_open: %s" % os.strerror(ctypes.get_errno()))
    fd = libc.syscall(SYS_PIDFD_GETFD, pfd, 3, 0)
    os.close(pfd)
    if fd < 0:
        pytest.skip("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
    s = socket.socket(fileno=fd)
    s.settimeout(5 * sbx.SCALE)
    return s


def frame(ftype, payload):
    import struct
    if not isinstance(payload, bytes):
        payload = json.dumps(payload).encode()
    return struct.pack("<II", ftype, len(payload)) + payload


def read_frame(s):
    import struct
    head = b""
    while len(head) < 8:
        head += s.recv(8 - len(head))
    ftype, n = struct.unpack("<II", head)
    body = b""
    while len(body) < n:
        body += s.recv(n - len(body))
    return ftype, json.loads(body)


def test_compromised_session_worker_frames_out_of_turn(daemon):
    bystander = daemon.client()
    bsid = open_session(bystander)
    chunk_ok(bystander, bsid, "y = 2")
    c = daemon.client()
    before = set(daemon.worker_pids())
    sid = open_session(c, tools=[T])
    chunk_ok(c, sid, "x = 1")
    pid = session_worker(daemon, before)
    os.kill(pid, signal.SIGSTOP)
    s = steal_channel(pid)
    try:
        # a chunk: the forged worker makes a call, then ends the chunk with a
        # runtime_error while the call is still out
        i = c.send_execute("return T.f(1)", session=sid, handlers={"T.f": lambda a: NO_REPLY})
        ftype, job = read_frame(s)
        assert ftype == 1 and job["op"] == "chunk", job
        s.sendall(frame(CHAN_TOOL_CALL, {"tool": "T", "function": "f", "args": [1]}))
        call = c.wait_deferred(1)
        s.sendall(frame(CHAN_ERROR, {"kind": "runtime_error", "message": "forged", "stats": {}}))
        r = c.wait(i)
        assert r.kind == "runtime_error" and r.data["session_closed"] is False, r
        c.reply(call, result="late")            # to a session that is idle now
        # a chunk whose result is followed by frames out of turn (idle)
        i = c.send_execute("return 2", session=sid)
        assert read_frame(s)[1]["op"] == "chunk"
        s.sendall(frame(CHAN_RESULT, {"value": 2, "stats": {}}) + frame(CHAN_OUTPUT, b"after") +
                  frame(CHAN_TOOL_CALL, {"tool": "T", "function": "f", "args": []}))
        r = c.wait(i)
        assert r.ok and r.result["value"] == 2 and r.result["output"] == "", r
        daemon.wait_log(r"protocol violation: frame out of turn")
        deadline = time.monotonic() + 5 * sbx.SCALE
        while chunk(c, sid, "return 3").kind != "session_not_found":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        s.close()
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    # only that session ended
    assert chunk_ok(bystander, bsid, "return y")["value"] == 2
    c.ping()
    c.close()
    bystander.close()
    wait_state(daemon, "sessions", 0)
    daemon.assert_no_leftovers()


def test_compromised_worker_more_calls_than_slots(daemon):
    c = daemon.client()
    before = set(daemon.worker_pids())
    sid = open_session(c, tools=[T])
    pid = session_worker(daemon, before)
    os.kill(pid, signal.SIGSTOP)
    s = steal_channel(pid)
    try:
        i = c.send_execute("return 1", session=sid, handlers={"T.f": lambda a: NO_REPLY})
        assert read_frame(s)[1]["op"] == "chunk"
        call = frame(CHAN_TOOL_CALL, {"tool": "T", "function": "f", "args": []})
        s.sendall(call * 17)                    # max_parallel_calls is 16
        r = c.wait(i)
        assert r.kind == "crashed" and "max_parallel_calls" in r.data["reason"], r
        assert r.data["session_closed"] is True, r
        for call in list(c.deferred):
            c.reply(call, result=0)
        assert len(c.deferred) <= 16
    finally:
        s.close()
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert_closed(c, sid)
    c.ping()
    c.close()
    wait_state(daemon, "sessions", 0)
    daemon.assert_no_leftovers()


# ------------------------------------------------ the answer backlog, streamed

def test_streamed_answer_fits_the_least_backlog(daemon_factory):
    # max_backlog_bytes at the least the config accepts for these ceilings:
    # one streamed execution's notifications and its answer together (1 MiB
    # of control bytes, escaped six-fold, twice) must reach a client that
    # reads them a moment later, not close its connection
    m = 1 << 20
    least = m + m + 12 * m + 2 * m
    d = daemon_factory(daemon={"max_message_bytes": m, "max_backlog_bytes": least},
                       ceilings={"max_output_bytes": m, "max_bindings_bytes": m},
                       defaults={"max_output_bytes": m, "max_bindings_bytes": m})
    c = d.client(timeout=30 * sbx.SCALE)
    i = c.send_execute("print(('\\1'):rep(%d)) return 1" % (m - 1), stream_output=True)
    d.wait_log(r"outcome=ok")
    time.sleep(0.2)                     # the answer is queued behind the notifications
    r = c.wait(i)
    assert r.ok and len(r.result["output"]) == m, r
    assert "".join(c.output_notes(i)) == r.result["output"]
    assert "closing the connection" not in d.stderr
    c.close()


def test_backlog_below_the_streamed_answer_is_refused(daemon_factory):
    m = 1 << 20
    d = daemon_factory(start=False, check_stop=False, daemon={"max_message_bytes": m,
                                            "max_backlog_bytes": m + m + 6 * m + 2 * m},
                       ceilings={"max_output_bytes": m, "max_bindings_bytes": m},
                       defaults={"max_output_bytes": m, "max_bindings_bytes": m})
    with pytest.raises(pytest.fail.Exception):
        d.start(ready_timeout=3 * sbx.SCALE)
    assert "12 x max_output_bytes" in d.stderr, d.stderr


# ------------------------------------------- sessions and the worker slots

def test_sessions_never_hold_every_worker(daemon_factory):
    # max_workers 2 with the default max_sessions (8): idle sessions holding
    # both slots would leave every stateless execute (and every further
    # session/open) queued with no clock until a session closes (up to a day
    # of idle_timeout_ms)
    d = daemon_factory(daemon={"max_workers": 2})
    with d.client(timeout=10 * sbx.SCALE) as c:
        sid = open_session(c, idle_timeout_ms=86400000)
        r = c.call("session/open", {"idle_timeout_ms": 86400000})
        assert r.kind == "busy" and r.data["max_sessions"] == 1, r
        for _ in range(3):
            r = c.execute("return 1", timeout_ms=int(2000 * sbx.SCALE))
            assert r.ok and r.result["value"] == 1, r
        assert chunk_ok(c, sid, "return 2")["value"] == 2
        c.call("session/close", {"session": sid})
        open_session(c)


def test_one_worker_has_no_sessions(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1})
    with d.client() as c:
        r = c.call("session/open", {})
        assert r.kind == "busy" and r.data["max_sessions"] == 0, r
        assert c.value("return 1") == 1


def make_spin(pid):
    """pid sleeps in read(2) on its channel between chunks: make it spin in
    user space instead (`jmp .` written over its next instruction), as a
    compromised worker would, burning CPU while the supervisor counts it idle."""
    import ctypes
    import struct
    from test_containment import (ORIG_RAX, PTRACE_GETREGS, PTRACE_SETREGS, UserRegs,
                                  stopped_in_read)
    if os.geteuid() != 0 or os.uname().machine != "x86_64":
        pytest.skip("needs root (ptrace of a worker under another uid) and x86_64")
    rip, ptrace_peektext, ptrace_poketext = 16, 1, 4
    with stopped_in_read(pid) as libc:
        regs = UserRegs()
        assert libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) == 0
        at = regs.r[rip]
        word = libc.ptrace(ptrace_peektext, pid, ctypes.c_void_p(at), None)
        spun = struct.unpack("<q", b"\xeb\xfe" + struct.pack("<q", word)[2:])[0]
        assert libc.ptrace(ptrace_poketext, pid, ctypes.c_void_p(at),
                           ctypes.c_void_p(spun)) == 0, os.strerror(ctypes.get_errno())
        regs.r[ORIG_RAX] = ctypes.c_ulong(-1).value     # no restart of the read
        assert libc.ptrace(PTRACE_SETREGS, pid, None, ctypes.byref(regs)) == 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_compromised_session_worker_spinning_while_idle(daemon):
    # cpu_ms is per chunk and nothing runs between chunks: a session worker
    # that uses CPU while idle is no longer the worker the supervisor
    # started.  It is killed and its session ends, instead of burning CPU
    # for up to idle_timeout_ms (a day), outside every budget.
    c = daemon.client()
    before = set(daemon.worker_pids())
    sid = open_session(c, idle_timeout_ms=3600000)
    chunk_ok(c, sid, "x = 1")
    pid = session_worker(daemon, before)
    start = cpu_seconds(pid)
    make_spin(pid)
    deadline = time.monotonic() + 5 * sbx.SCALE
    while cpu_seconds(pid) - start < 0.1:
        assert time.monotonic() < deadline, "the worker does not spin"
        time.sleep(0.05)
    daemon.wait_log(r"protocol violation: CPU time used between chunks", timeout=10 * sbx.SCALE)
    assert_closed(c, sid)
    c.ping()
    c.close()
    wait_state(daemon, "sessions", 0)
    daemon.assert_no_leftovers()


def test_poisoned_globals_metatable_in_a_session(client):
    # _G's own metatable made hostile: snapshots and return_bindings read
    # the globals raw, and a chunk's own global access runs the metamethods
    # under its limits
    sid = open_session(client, limits={"max_reductions": 1000000})
    chunk_ok(client, sid, "x = 1 local function spin() while true do end end "
                          "setmetatable(_G, {__index = spin, __newindex = spin, __pairs = spin, "
                          "__len = spin, __metatable = 'no'})")
    r = chunk_ok(client, sid, "rawset(_G, 'y', 2) return 1", return_bindings=True)
    assert r["bindings"] == [["x", 1], ["y", 2]] or set(r["binding_names"]) == {"x", "y"}, r
    snap = client.call("session/snapshot", {"session": sid})
    assert snap.ok and set(snap.result["binding_names"]) == {"x", "y"}, snap
    r = chunk(client, sid, "return undefined_global")
    assert r.kind == "reductions_limit" and r.data["session_closed"] is True, r


def test_old_coroutine_budget_none_then_budget(daemon_factory):
    # a coroutine armed under one chunk's budget, resumed by a chunk without
    # any budget (it runs), then by a chunk with a small one (billed)
    d = daemon_factory(defaults={"max_reductions": "infinity", "cpu_ms": "infinity"},
                       ceilings={"max_reductions": "infinity", "cpu_ms": "infinity"})
    with d.client(timeout=20 * sbx.SCALE) as c:
        sid = open_session(c)
        chunk_ok(c, sid, "co = coroutine.wrap(function() while true do for i = 1, 3000000 do "
                         "end coroutine.yield(1) end end) return co()",
                 limits={"max_reductions": 10000000})
        assert chunk_ok(c, sid, "local n = 0 for k = 1, 5 do n = n + co() end return n")["value"] == 5
        r = chunk(c, sid, "local n = 0 for k = 1, 5 do n = n + co() end return n",
                  limits={"max_reductions": 1000000})
        assert r.kind == "reductions_limit", r


def supervisor_cpu(d):
    """The daemon's own CPU time so far, in seconds (not its workers')."""
    return sbx_stat(d.pid) / os.sysconf("SC_CLK_TCK")


def sbx_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def test_strings_the_daemon_repeats_are_bounded(daemon_factory):
    """Every tool/call (and execution/output) repeats its execution's id and
    its tool's module: an 8 MiB id with 40 tool calls cost the supervisor
    3.5 s of CPU while other clients waited.  A string id over 1024 bytes
    (RPC_ID_MAX), a module over 1024 bytes and a params.session over 1024
    bytes are refused with invalid_params (the refusal carries the id once),
    before anything runs; at exactly 1024 bytes each works, 40 tool calls
    and streamed output each carrying them."""
    d = daemon_factory(daemon={"max_message_bytes": 16 << 20})
    c = d.client(timeout=60 * sbx.SCALE)
    code = "for i = 1, 40 do T.f(i) end print('x') return 1"
    calls = []

    def tool(t, module):
        return [{"name": "T", "module": module, "functions": ["f"]}]
    # the legitimate neighbour: 1024-byte id and module
    id_ok, mod_ok = "i" * 1024, "M" * 1024
    i = c.send_execute(code, tools=tool("T", mod_ok), id=id_ok, stream_output=True,
                       handlers={"T.f": lambda a: calls.append(a) or 0})
    r = c.wait(i)
    assert r.ok and r.id == id_ok, r
    assert len(calls) == 40
    assert all(tc.execution_id == id_ok and tc.module == mod_ok for tc in c.tool_calls)
    assert "".join(c.output_notes(id_ok)) == "x\n"
    # one byte more, and the 8 MiB id: refused before any tool call
    n = len(c.tool_calls)
    for big in ("i" * 1025, "j" * (8 << 20)):
        cpu0 = supervisor_cpu(d)
        r = c.wait(c.send_execute(code, tools=tool("T", mod_ok), id=big,
                                  handlers={"T.f": lambda a: 0}))
        print("id of %d bytes refused: %.3f s of supervisor CPU" % (len(big), supervisor_cpu(d) - cpu0))
        assert r.kind == "invalid_params" and r.id == big, r.kind
        assert r.data["max_id_bytes"] == 1024 and "1024" in r.message, r.message
    r = c.execute(code, tools=tool("T", "M" * 1025), handlers={"T.f": lambda a: 0})
    assert r.kind == "invalid_params" and "module must be a string of at most 1024" in r.message, r
    r = c.execute(code, tools=tool("T", "M" * (8 << 20)), handlers={"T.f": lambda a: 0})
    assert r.kind == "invalid_params", r.kind
    assert len(c.tool_calls) == n
    for method in ("session/snapshot", "session/close"):
        r = c.call(method, {"session": "s" * 1025})
        assert r.kind == "invalid_params" and "at most 1024 bytes" in r.message, r
        r = c.call(method, {"session": "s" * 1024})
        assert r.kind == "session_not_found", r
    r = c.execute("return 1", session="s" * 1025)
    assert r.kind == "invalid_params", r
    c.ping()


def test_reload_below_the_open_sessions(daemon_factory):
    # a reload lowers max_workers under the sessions already open: they keep
    # their workers, and one more worker is still the executions'
    d = daemon_factory(daemon={"max_workers": 4})
    with d.client(timeout=10 * sbx.SCALE) as c:
        sids = [open_session(c) for _ in range(3)]
        d.write_config(merge_config(daemon={"max_workers": 2}))
        d.signal(signal.SIGHUP)
        d.wait_log(r"SIGHUP: configuration reloaded")
        for _ in range(3):
            r = c.execute("return 1", timeout_ms=int(2000 * sbx.SCALE))
            assert r.ok and r.result["value"] == 1, r
        assert c.call("session/open", {}).kind == "busy"
        for sid in sids:
            assert chunk_ok(c, sid, "return 2")["value"] == 2
            c.call("session/close", {"session": sid})
        open_session(c)
