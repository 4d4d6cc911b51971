"""AsyncClient against the real daemon: concurrency, tool routing, cancellation,
long lines, the size guard, reconnecting."""

import asyncio
import threading

import pytest

import sandboxd
from conftest import SCALE


def run(coro, timeout=60):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


def test_execute_value_bindings_output(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            r = await c.execute("x = 40; print('hi'); return x + 2, 2.0, {a = true}")
            assert r.value == [42, 2.0, {"a": True}]
            assert isinstance(r.value[1], float)
            assert r.output == "hi\n" and r.binding_names == ["x"]
            assert r.stats["tool_calls"] == 0
            r2 = await c.execute("return x + 1", bindings=r.bindings)
            assert r2.value == 41
            assert await c.ping() == {}
            assert (await c.describe())["name"] == "sandboxd"
            assert await c.binding_names(r.bindings) == ["x"]
            assert (await c.prompt_info())["language"].startswith("Lua")
            await c.check("return 1")
    run(main())


def test_concurrent_executions_tool_calls_answered_out_of_order(sock):
    """Both executions wait in a tool call at once; B's call is answered first
    and B finishes while A's call is still open: each answer reaches the
    execution that asked (routing by execution_id)."""
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            a_called = asyncio.Event()
            b_finished = asyncio.Event()
            answered = []

            async def a_get(k):
                a_called.set()
                await b_finished.wait()
                answered.append("A")
                return "A:" + k

            async def b_get(k):
                await a_called.wait()
                answered.append("B")
                return "B:" + k

            async def b():
                r = await c.execute("return KV.get('y') .. '!'", tools={"KV": {"get": b_get}})
                b_finished.set()
                return r.value

            ra, rb = await asyncio.gather(
                c.execute("return KV.get('x') .. '?'", tools={"KV": {"get": a_get}}), b())
            assert ra.value == "A:x?" and rb == "B:y!"
            assert answered == ["B", "A"]
    run(main())


def test_many_concurrent_executions_interleaved(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            async def f(i, j):
                await asyncio.sleep(0.001 * ((i * 7 + j) % 5))
                return i * 100 + j

            rs = await asyncio.gather(*[
                c.execute("local s = 0 for j = 1, 5 do s = s + T.f(%d, j) end return s" % i,
                          tools={"T": {"f": f}}) for i in range(12)])
            assert [r.value for r in rs] == [i * 500 + 15 for i in range(12)]
            assert all(r.stats["tool_calls"] == 5 for r in rs)
    run(main())


def test_slow_sync_tool_while_another_execution_finishes(sock):
    """A sync tool runs in a thread: the loop keeps serving the connection."""
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            release = threading.Event()
            started = threading.Event()

            def slow(x):
                started.set()
                release.wait(10)                # until the other execution has finished
                return x

            a = asyncio.ensure_future(c.execute("return T.slow(7)", tools={"T": {"slow": slow}}))
            while not started.is_set():
                await asyncio.sleep(0.01)
            b = await c.execute("return 'quick'")
            assert b.value == "quick" and not a.done()
            release.set()
            assert (await a).value == 7
    run(main())


def test_cancel_while_tool_runs_sends_cancel_request(daemon_factory):
    """With one worker and no queue, the next execute only gets a worker if the
    cancelled one was really ended by $/cancelRequest."""
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0, "pool_size": 1})

    async def main():
        async with sandboxd.AsyncClient(d.socket_path) as c:
            started = asyncio.Event()
            tool_cancelled = asyncio.Event()

            async def wait_forever():
                started.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    tool_cancelled.set()
                    raise

            t = asyncio.ensure_future(c.execute("return T.w()", tools={"T": {"w": wait_forever}},
                                                timeout_ms=30000))
            await started.wait()
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert tool_cancelled.is_set()
            # the daemon frees the worker: retry briefly while it reaps it
            for _ in range(100):
                try:
                    assert (await c.execute("return 5")).value == 5
                    break
                except sandboxd.Busy:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the cancelled execution still holds the only worker")

            # asyncio.timeout cancels the same way
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    while True:             # until the worker of `return 5` is reaped
                        try:
                            await c.execute("while true do end", timeout_ms=30000)
                        except sandboxd.Busy:
                            await asyncio.sleep(0.02)
            for _ in range(100):
                try:
                    assert (await c.execute("return 6")).value == 6
                    break
                except sandboxd.Busy:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("asyncio.timeout did not cancel the execution")
    run(main())


def test_lines_over_64k_both_ways(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            seen = {}

            def echo(s):
                seen["len"] = len(s)
                return s + "!" * 100000

            r = await c.execute("local s = string.rep('x', 200000) "
                                "local back = T.echo(s) return #back, back:sub(-3)",
                                tools={"T": {"echo": echo}})
            assert seen["len"] == 200000 and r.value == [300000, "!!!"]
            big = await c.execute("return string.rep('y', 300000)")
            assert big.value == "y" * 300000
            r = await c.execute("return #s", bindings=[["s", "z" * 300000]])
            assert r.value == 300000
    run(main())


def test_oversized_tool_result_is_a_catchable_lua_error(sock):
    """The test daemon's max_message_bytes is 1 MiB: a 2 MB answer would be
    refused with id null and leave the call waiting until the timeout.  A
    value is the proof that it did not: a call left waiting ends the whole
    execution with `timeout` (its timeout_ms, the ceiling, is a safety net)."""
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            r = await c.execute("local ok, err = pcall(T.big) return ok, err, T.small()",
                                tools={"T": {"big": lambda: "x" * 2000000,
                                             "small": lambda: "fine"}},
                                timeout_ms=30000 * SCALE)
            ok, err, small = r.value
            assert ok is False and "exceeds the daemon's message limit" in err
            assert err.startswith("T.big: ")
            assert small == "fine"
    run(main())


def test_oversized_request_refused_before_sending(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            with pytest.raises(sandboxd.InvalidRequest) as ei:
                await c.execute("return 1", bindings=[["s", "x" * 2000000]])
            assert ei.value.kind == "message_too_large"
            assert (await c.execute("return 1")).value == 1     # connection still fine
    run(main())


def test_daemon_restarted_mid_execution(daemon_factory):
    d = daemon_factory()

    async def main():
        c = sandboxd.AsyncClient(d.socket_path)
        started = asyncio.Event()

        async def tool():
            started.set()
            await asyncio.sleep(3600)

        t = asyncio.ensure_future(c.execute("return T.f()", tools={"T": {"f": tool}}))
        await started.wait()
        d.kill()
        with pytest.raises(sandboxd.DaemonUnavailable):
            await t
        with pytest.raises(sandboxd.DaemonUnavailable):
            await c.ping()                      # nothing listens now
        d.start()
        assert (await c.execute("return 'again'")).value == "again"   # reconnected
        await c.close()
    run(main())


def test_unknown_socket_is_daemon_unavailable(tmp_path):
    async def main():
        c = sandboxd.AsyncClient(str(tmp_path / "none.sock"))
        with pytest.raises(sandboxd.DaemonUnavailable) as ei:
            await c.execute("return 1")
        assert ei.value.data["client"] is True
    run(main())


def test_socket_defaults_to_env(sock, monkeypatch):
    monkeypatch.setenv("SANDBOXD_SOCKET", sock)
    assert sandboxd.AsyncClient().socket_path == sock
    assert sandboxd.Client().socket_path == sock
    monkeypatch.delenv("SANDBOXD_SOCKET")
    assert sandboxd.Client().socket_path == "/run/sandboxd/sandboxd.sock"


def test_tool_calling_the_client_again(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            async def inner(n):
                return (await c.execute("return %d * 2" % n)).value

            r = await c.execute("return T.inner(21)", tools={"T": {"inner": inner}})
            assert r.value == 42
    run(main())


def test_stream_output_callable_gets_the_output(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            got = []
            r = await c.execute("print('a') print('b') return 1", stream_output=got.append)
            assert "".join(got) == r.output == "a\nb\n"
            got.clear()
            with pytest.raises(sandboxd.LuaError):
                await c.execute("print('before') error('x')", stream_output=got.append)
            assert "".join(got) == "before\n"
    run(main())


def test_one_client_across_event_loops(sock):
    c = sandboxd.AsyncClient(sock)
    assert asyncio.run(c.execute("return 1")).value == 1
    assert asyncio.run(c.execute("return 2")).value == 2     # a new loop: a new connection
    asyncio.run(c.close())


def test_inline_tools_run_on_the_loop(sock):
    import threading
    seen = []

    @sandboxd.tool(inline=True)
    def quick(x):
        seen.append(threading.get_ident())
        if x < 0:
            raise ValueError("negative")
        return x * 2

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            r = await c.execute("local ok, e = pcall(T.quick, -1) return T.quick(4), e",
                                tools={"T": {"quick": quick}})
            assert r.value == [8, "T.quick: ValueError: negative"]
    asyncio.run(main())
    assert seen == [threading.get_ident()] * 2
