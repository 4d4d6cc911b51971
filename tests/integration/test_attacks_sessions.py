"""Attacks on daemon sessions (docs/protocol.md §3): guessed and reused
session ids, closes and chunks racing, the session limits, a session
worker killed, stopped or compromised (frames out of turn, CPU used while
idle), sessions holding worker slots, and budgets carried from one chunk
to the next, played as a hostile chunk, a hostile client and a hostile
worker against the real daemon.  Each test states the attack and what
must hold.  The session helpers here serve test_attacks_metatables too."""

import json
import os
import signal
import time

import pytest

import sbx
from conftest import merge_config
from sbx import NO_REPLY

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
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        st = state(daemon)
        if st[key] == want:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


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
    return daemon.new_worker(before)


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
        deadline = time.monotonic() + sbx.SAFETY_NET
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
    deadline = time.monotonic() + sbx.SAFETY_NET
    while cpu_seconds(pid) - start < 0.1:
        assert time.monotonic() < deadline, "the worker does not spin"
        time.sleep(0.05)
    daemon.wait_log(r"protocol violation: CPU time used between chunks")
    assert_closed(c, sid)
    c.ping()
    c.close()
    wait_state(daemon, "sessions", 0)
    daemon.assert_no_leftovers()


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
