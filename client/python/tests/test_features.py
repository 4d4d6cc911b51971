"""Protocol 1.1 features, each tested when the daemon's describe lists it:
parallel tool calls, daemon sessions, live output, max_tool_calls."""

import asyncio
import threading
import time

import pytest

import sandboxd


@pytest.fixture(scope="module")
def features(daemon):
    with sandboxd.Client(daemon.socket_path) as c:
        return c.features()


def need(features, name):
    if name not in features:
        pytest.skip("the daemon does not list %r in describe's features" % name)


def test_parallel_tool_calls_overlap(sock, features):
    need(features, "parallel")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            order = []

            async def fetch(i):
                await asyncio.sleep(0.5 - 0.1 * i)      # later calls answer first
                order.append(i)
                return i * 10

            r = await c.execute(
                "return parallel(function() return T.fetch(1) end, "
                "function() return T.fetch(2) end, function() return T.fetch(3) end, "
                "function() return T.fetch(4) end)", tools={"T": {"fetch": fetch}})
            # the later calls answered first: they ran together, which the
            # order shows however long a loaded machine made them take
            assert r.value == [10, 20, 30, 40] and order == [4, 3, 2, 1]
    asyncio.run(main())


def test_parallel_sync_tools_in_threads(sock, features):
    need(features, "parallel")

    together = threading.Barrier(3, timeout=30)     # broken unless all 3 run at once

    def slow(i):
        together.wait()
        return i

    with sandboxd.Client(sock, tool_threads=4) as c:
        r = c.execute("return parallel(function() return T.s(1) end, "
                      "function() return T.s(2) end, function() return T.s(3) end)",
                      tools={"T": {"s": slow}})
        assert r.value == [1, 2, 3], r.value


def test_daemon_session_keeps_functions(sock, features):
    need(features, "sessions")
    with sandboxd.Client(sock) as c:
        with c.session(tools={"T": {"f": lambda x: x * 2}}) as s:
            assert s.stateful
            s.execute("function double(x) return T.f(x) end n = 1")
            assert s.execute("n = n + 1 return double(n)").value == 4
            snap = s.snapshot()
            assert "n" in snap["binding_names"]
            with pytest.raises(sandboxd.LuaError) as ei:
                s.execute("n = 3 error('x')")
            assert not ei.value.session_closed
            assert "as the chunk left it" in sandboxd.render(ei.value)
            assert s.execute("return n").value == 3             # a Lua error keeps the state
            s.execute("n = 2")
            with pytest.raises(sandboxd.LimitExceeded) as ei:
                s.execute("while true do end", timeout_ms=200)
            assert ei.value.session_closed
            assert "session ended" in sandboxd.render(ei.value)
            assert s.execute("return n").value is None          # a fresh session
            assert s.restarts == 1
        r = c.execute("return n", bindings=snap["bindings"])
        assert r.value == 2


def test_async_daemon_session(sock, features):
    need(features, "sessions")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            async with c.session(bindings=[["k", 5]]) as s:
                await s.execute("local c = 0 function tick() c = c + 1 return c end")
                await s.execute("tick()")
                assert (await s.execute("return tick() + k")).value == 7
            with pytest.raises(sandboxd.SessionNotFound):
                await s.execute("return 1")
    asyncio.run(main())


def test_stream_output_live(sock, features):
    need(features, "stream_output")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            got = []
            seen_before_end = asyncio.Event()

            async def gate():
                if got:
                    seen_before_end.set()
                return 1

            r = await c.execute("print('first') T.gate() print('second')",
                                tools={"T": {"gate": gate}}, stream_output=got.append)
            assert seen_before_end.is_set(), "no output arrived while the chunk ran"
            assert "".join(got) == r.output == "first\nsecond\n"
    asyncio.run(main())


def test_max_tool_calls_by_the_daemon(sock, features):
    need(features, "max_tool_calls")
    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.LimitExceeded) as ei:
            c.execute("for i = 1, 5 do pcall(T.f) end", tools={"T": {"f": lambda: 1}},
                      max_tool_calls=2)
        assert ei.value.kind == "tool_call_limit" and "client" not in ei.value.data


def test_daemon_session_after_the_daemon_restarted(daemon_factory):
    d = daemon_factory()
    with sandboxd.Client(d.socket_path) as c:
        if "sessions" not in c.features():
            pytest.skip("the daemon does not list 'sessions' in describe's features")
        s = c.session(bindings=[["k", 1]])
        s.execute("function f() return k + 1 end")
        assert s.execute("return f()").value == 2
        d.kill()
        with pytest.raises(sandboxd.DaemonUnavailable):
            s.execute("return f()")
        d.start()
        assert s.execute("return k, f").value == [1, None]      # a new session, initial bindings
        assert s.restarts == 1
        s.close()


def test_stream_output_live_blocking_client(sock, features):
    need(features, "stream_output")
    got = []
    seen = []
    with sandboxd.Client(sock) as c:
        r = c.execute("print('one') T.look() print('two')",
                      tools={"T": {"look": lambda: seen.append(list(got))}},
                      stream_output=got.append)
    assert seen == [["one\n"]], "no output arrived while the chunk ran"
    assert "".join(got) == r.output == "one\ntwo\n"


def test_parallel_with_inline_tools_in_the_blocking_client(sock, features):
    """The default blocking client answers the calls of parallel one after
    another, in the order they came: slower, still correct."""
    need(features, "parallel")
    with sandboxd.Client(sock) as c:
        r = c.execute("return parallel(function() return T.f(1) end, "
                      "function() return T.f(2) end, function() return T.f(3) end)",
                      tools={"T": {"f": lambda x: x * 10}})
        assert r.value == [10, 20, 30] and r.stats["tool_calls"] == 3


def test_session_prompt_info(sock, features):
    need(features, "sessions")
    with sandboxd.Client(sock) as c:
        plain, sess = c.prompt_info(), c.prompt_info(session=True)
        assert sess["constraints"] != plain["constraints"]
        assert sess["constraints"].strip() in c.system_prompt({"T": {"f": len}}, session=True)


def test_daemon_session_required_but_absent(sock):
    with sandboxd.Client(sock) as c:
        c._connection().info.features = frozenset()
        with pytest.raises(sandboxd.InvalidRequest) as ei:
            c.session(daemon=True).execute("return 1")
        assert ei.value.kind == "method_not_found"
        s = c.session()                                     # falls back to bindings
        s.execute("x = 1")
        assert not s.stateful and s.execute("return x").value == 1


def test_parallel_plain_functions_overlap_in_threads(sock, features):
    need(features, "parallel")

    together = threading.Barrier(3, timeout=30)     # broken unless all 3 run at once

    def slow(i):
        together.wait()
        if i == 3:
            raise ValueError("three")
        return i

    async def main():
        async with sandboxd.AsyncClient(sock, tool_threads=4) as c:
            r = await c.execute("return parallel(function() return T.s(1) end, "
                                "function() return T.s(2) end, "
                                "function() return select(2, pcall(T.s, 3)) end)",
                                tools={"T": {"s": slow}})
            assert r.value == [1, 2, "T.s: ValueError: three"], r.value
    asyncio.run(main())


def test_stream_as_an_async_iterator(sock, features):
    """Each piece arrives while the chunk runs: the tool waits until the
    loop has taken the first one, so output held back to the end would
    leave it waiting until the deadline."""
    need(features, "stream_output")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            took_first = asyncio.Event()

            async def gate():
                await asyncio.wait_for(took_first.wait(), 5)
                return 2

            got = []
            async with c.stream("print('first') local n = T.gate() print('second') return n",
                                tools={"T": {"gate": gate}}, timeout_ms=10000) as run:
                with pytest.raises(RuntimeError):
                    run.result
                async for text in run:
                    got.append(text)
                    took_first.set()
            assert got == ["first\n", "second\n"]
            assert run.result.value == 2 and run.result.output == "first\nsecond\n"
            assert run.result.stats["tool_calls"] == 1
            assert [t async for t in run] == []             # ended: stays ended
    asyncio.run(main())


def test_stream_raises_the_error_after_the_output(sock, features):
    need(features, "stream_output")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            got = []
            with pytest.raises(sandboxd.LuaError) as ei:
                async for text in c.stream("print('before') error('broke')"):
                    got.append(text)
            assert got == ["before\n"] and "broke" in ei.value.message
            r = await c.stream("print('x') return 5")       # awaited: the Result
            assert r.value == 5 and r.output == "x\n"
    asyncio.run(main())


def test_stream_left_early_cancels_the_execution(sock, features):
    """Leaving `async with` after the first piece cancels the chunk (it would
    run to its 30 s timeout otherwise); the connection goes on."""
    need(features, "stream_output")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            t0 = asyncio.get_running_loop().time()
            async with c.stream("print('go') while true do end", timeout_ms=30000) as run:
                async for text in run:
                    assert text == "go\n"
                    break
            assert asyncio.get_running_loop().time() - t0 < 10
            with pytest.raises(RuntimeError):
                run.result
            assert (await c.execute("return 1")).value == 1
            for _ in range(100):            # no worker is left running the loop
                st = (await c.describe())["state"]
                if st["idle_workers"] == st["workers"]:
                    break
                await asyncio.sleep(0.05)
            assert st["idle_workers"] == st["workers"], st
    asyncio.run(main())


def test_stream_in_a_session(sock, features):
    need(features, "stream_output")

    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            async with c.session() as s:
                got = [t async for t in s.stream("x = 40 print(x)")]
                assert got == ["40\n"]
                assert (await s.execute("return x + 2")).value == 42
    asyncio.run(main())


# The blocking client's LiveOutput (sandboxd.sync.LiveOutput): the same
# contract as the async one, with the iterating thread reading the connection.

def idle(c):
    """Until no worker runs a chunk (a cancelled one is reaped): describe's state."""
    for _ in range(100):
        st = c.describe()["state"]
        if st["idle_workers"] == st["workers"]:
            return st
        time.sleep(0.05)
    return st


def test_blocking_stream_gives_each_piece_while_the_chunk_runs(sock, features):
    """The tool runs in the thread that iterates, after the loop has taken the
    first piece: output held back to the end would fail its look."""
    need(features, "stream_output")
    got, seen = [], []

    def gate():
        seen.append((list(got), threading.current_thread() is threading.main_thread()))
        return 2

    with sandboxd.Client(sock) as c:
        with c.stream("print('first') local n = T.gate() print('second') return n",
                      tools={"T": {"gate": gate}}, timeout_ms=10000) as run:
            assert isinstance(run, sandboxd.sync.LiveOutput)
            with pytest.raises(RuntimeError):
                run.result
            for text in run:
                got.append(text)
        assert seen == [(["first\n"], True)]
        assert got == ["first\n", "second\n"]
        assert run.result.value == 2 and run.result.output == "first\nsecond\n"
        assert run.result.stats["tool_calls"] == 1
        assert list(run) == []                          # ended: stays ended
        assert run.wait() is run.result


def test_blocking_stream_raises_the_error_after_the_output(sock, features):
    need(features, "stream_output")
    with sandboxd.Client(sock) as c:
        got = []
        with pytest.raises(sandboxd.LuaError) as ei:
            for text in c.stream("print('before') error('broke')"):
                got.append(text)
        assert got == ["before\n"] and "broke" in ei.value.message
        run = c.stream("print('x') return 5")
        r = run.wait()                                  # the Result, the output left in run
        assert r.value == 5 and r.output == "x\n" and list(run) == ["x\n"]
        with pytest.raises(sandboxd.LuaError):
            c.stream("error('again')").wait()


@pytest.mark.parametrize("leave", ["break", "with", "exception"])
def test_blocking_stream_left_early_cancels_and_keeps_the_connection(sock, features, leave):
    """Leaving the loop after the first piece cancels the chunk (else it runs to
    its 30 s timeout) and reads until the daemon has ended it: nothing is left
    pending, and the same connection serves the next call."""
    need(features, "stream_output")
    with sandboxd.Client(sock) as c:
        conn = c._connection()
        t0 = time.monotonic()
        run = c.stream("print('go') while true do end", timeout_ms=30000)
        if leave == "break":
            for text in run:
                assert text == "go\n"
                break
        elif leave == "with":
            with run:
                assert next(iter(run)) == "go\n"
        else:
            with pytest.raises(KeyError):
                for text in run:
                    raise KeyError(text)
        assert time.monotonic() - t0 < 10
        assert conn.pending == {} and conn.executions == {}     # the daemon's answer came
        with pytest.raises(RuntimeError):
            run.result
        assert list(run) == []
        assert c.execute("return 1").value == 1 and c._conn is conn
        st = idle(c)
        assert st["idle_workers"] == st["workers"], st


def test_blocking_stream_in_a_session_and_one_left_early(sock, features):
    need(features, "stream_output")
    with sandboxd.Client(sock) as c:
        with c.session() as s:
            assert list(s.stream("x = 40 print(x)")) == ["40\n"]
            assert s.execute("return x + 2").value == 42
            for _ in s.stream("print('go') while true do end"):
                break
            assert s.execute("return 1 + 1").value == 2     # the session goes on (anew if it ended)


def test_blocking_stream_woken_by_another_reading_thread(sock, features):
    """Another thread reads the connection (it waits for its own answer) and
    meets this stream's output: the piece reaches the iterating thread
    without waiting for that thread's answer, which only comes after the
    piece was seen.  (The reader wakes it at once; the 50 ms tick of the
    reading thread would too, later.)"""
    need(features, "stream_output")
    took_first = threading.Event()
    other = {}

    def hold():
        return took_first.wait(10)

    with sandboxd.Client(sock, tool_threads=2) as c:
        def elsewhere():
            other["value"] = c.execute("return T.hold()", tools={"T": {"hold": hold}}).value
        t = threading.Thread(target=elsewhere)
        t.start()
        for _ in range(200):                            # that thread reads, waiting
            if c._conn is not None and c._conn.reader is not None:
                break
            time.sleep(0.01)
        got = []
        for text in c.stream("print('first') return 1"):
            got.append(text)
            took_first.set()
        t.join(10)
        assert got == ["first\n"] and other == {"value": True}
