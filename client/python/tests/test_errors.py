"""Every error class (client/python/README.md), from the real daemon (and the
client's own decisions), with kind, code, output and stats."""

import asyncio
import os
import signal
import threading
import time

import pytest

import sandboxd


def test_lua_errors(sock):
    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.LuaError) as ei:
            c.execute("print('before')\nlocal t = nil\nreturn t.x")
        e = ei.value
        assert (e.kind, e.code, e.line) == ("runtime_error", -32002, 3)
        assert e.output == "before\n" and "stack traceback" in e.traceback
        assert e.stats["wall_us"] >= 0 and isinstance(e, sandboxd.SandboxdError)
        with pytest.raises(sandboxd.LuaError) as ei:
            c.execute("x = 1\nx")
        assert ei.value.kind == "syntax_error" and "return <expression>" in ei.value.message


@pytest.mark.parametrize("code, kw, kind", [
    ("while true do end", {"timeout_ms": 200}, "timeout"),
    ("local t = {} for i = 1, 1e9 do t[i] = i end", {"limits": {"max_heap": 2000000}},
     "memory_limit"),
    ("while true do end", {"limits": {"max_reductions": 100000}}, "reductions_limit"),
    ("while true do end", {"limits": {"cpu_ms": 100}}, "cpu_limit"),
    ("big = string.rep('x', 5000)", {"limits": {"max_bindings_bytes": 1000}},
     "bindings_too_large"),
])
def test_limit_exceeded(sock, code, kw, kind):
    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.LimitExceeded) as ei:
            c.execute(code, **kw)
        assert ei.value.kind == kind and ei.value.stats is not None
        assert ei.value.code == sandboxd.errors.CODES[kind]


@pytest.mark.parametrize("kw, kind", [
    ({"timeout_ms": 10 ** 9}, "limit_out_of_range"),
    ({"limits": {"priority": "urgent"}}, "invalid_params"),
    ({"limits": {"max_heap": 0}}, "invalid_params"),
])
def test_invalid_request_from_the_daemon(sock, kw, kind):
    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.InvalidRequest) as ei:
            c.execute("return 1", **kw)
        assert ei.value.kind == kind and ei.value.code == -32602


def test_code_too_large_and_bad_bindings(sock):
    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.InvalidRequest) as ei:
            c.execute("return 1 --" + "x" * 70000)
        assert ei.value.kind == "code_too_large"
        with pytest.raises(sandboxd.InvalidRequest) as ei:
            c.binding_names([["a", 1.5]])
        assert ei.value.kind == "invalid_params"


def test_busy_with_one_worker(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0, "pool_size": 1})

    async def main():
        async with sandboxd.AsyncClient(d.socket_path) as c:
            hold = asyncio.ensure_future(c.execute("while true do end", timeout_ms=1500))
            await asyncio.sleep(0.3)
            with pytest.raises(sandboxd.Busy) as ei:
                await c.execute("return 1")
            assert ei.value.kind == "busy" and ei.value.code == -32009
            with pytest.raises(sandboxd.LimitExceeded):
                await hold
    asyncio.run(main())


def test_client_deadline_counts_queue_time(daemon_factory):
    """The daemon's timeout_ms starts when a worker takes the job; the client's
    deadline starts at the call, so a job stuck in the queue still ends."""
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 4, "pool_size": 1})

    async def main():
        async with sandboxd.AsyncClient(d.socket_path, deadline_grace=0.2) as c:
            hold = asyncio.ensure_future(c.execute("while true do end", timeout_ms=3000))
            await asyncio.sleep(0.2)
            with pytest.raises(sandboxd.LimitExceeded) as ei:
                await c.execute("return 1", timeout_ms=300)
            # the client's own deadline, not the daemon's answer, which
            # could come only after the held execution's 3 s
            assert ei.value.kind == "timeout" and ei.value.data["client"] is True
            with pytest.raises(sandboxd.LimitExceeded):
                await hold
            assert (await c.execute("return 2")).value == 2
    asyncio.run(main())

    with sandboxd.Client(d.socket_path, deadline_grace=0.2) as c:
        th = threading.Thread(target=lambda: pytest.raises(
            sandboxd.LimitExceeded, c.execute, "while true do end", timeout_ms=2000))
        th.start()
        time.sleep(0.3)
        with pytest.raises(sandboxd.LimitExceeded) as ei:
            c.execute("return 1", timeout_ms=300)
        assert ei.value.data["client"] is True     # not the daemon's, after the held 2 s
        th.join(10)


def test_cancelled_by_daemon_shutdown(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 4, "pool_size": 1,
                               "shutdown_grace_ms": 200})

    async def main():
        async with sandboxd.AsyncClient(d.socket_path) as c:
            running = asyncio.ensure_future(c.execute("while true do end", timeout_ms=20000))
            await asyncio.sleep(0.2)
            queued = asyncio.ensure_future(c.execute("return 1"))
            await asyncio.sleep(0.2)
            d.proc.send_signal(signal.SIGTERM)
            for t in (queued, running):
                with pytest.raises(sandboxd.Cancelled) as ei:
                    await t
                assert ei.value.kind == "cancelled" and ei.value.code == -32800
    asyncio.run(main())


def test_forbidden(daemon_factory):
    d = daemon_factory(daemon={"allow_uids": "12345"})
    if os.getuid() == 12345:
        pytest.skip("runs as the allowed uid")
    with pytest.raises(sandboxd.Forbidden) as ei:
        sandboxd.Client(d.socket_path).ping()
    assert ei.value.kind == "forbidden"

    async def main():
        with pytest.raises(sandboxd.Forbidden):
            await sandboxd.AsyncClient(d.socket_path).execute("return 1")
    asyncio.run(main())


def test_session_not_found(sock):
    with sandboxd.Client(sock) as c:
        s = c.session()
        s.close()
        with pytest.raises(sandboxd.SessionNotFound):
            s.execute("return 1")
        if "sessions" in c.features():
            with pytest.raises(sandboxd.SessionNotFound) as ei:
                c._call("session/close", {"session": "no-such-session"})
            assert ei.value.code == -32013


def test_daemon_unavailable(tmp_path):
    with pytest.raises(sandboxd.DaemonUnavailable):
        sandboxd.Client(str(tmp_path / "nothing")).ping()


def test_error_mapping_of_unknown_kinds():
    e = sandboxd.errors.error_from_wire({"code": -32007, "message": "died",
                                         "data": {"kind": "crashed", "signal": 9}})
    assert type(e) is sandboxd.SandboxdError and e.kind == "crashed" and e.data["signal"] == 9
    e = sandboxd.errors.error_from_wire({"code": -32009, "message": "x"})
    assert isinstance(e, sandboxd.Busy)
    assert isinstance(sandboxd.errors.error_from_wire("junk"), sandboxd.ProtocolError)
