"""sandboxd.aio - AsyncClient: the asyncio client.

One connection per client, opened on the first call (and again on the call
after the daemon went away).  A protocol object reads the connection all the
time: answers resolve the future of their request id; each `tool/call` is
routed by its execution_id to the tools of that execute and runs in a task of
its own (coroutine functions awaited, other callables in a thread of the
client's pool), so the tool calls of concurrent executions, and of one
execution under `parallel`, overlap and are answered in any order.

Cancelling the task that awaits a call (directly, with asyncio.timeout, in a
task group) sends $/cancelRequest for it and cancels the tool tasks of that
execution; CancelledError propagates at once and the daemon's later
`cancelled` answer is dropped.  An execute also has a client-side deadline
(timeout_ms plus a grace, counted from the call, so queue time is included).

Incoming lines may be as long as an answer the daemon can send (from
`describe`); asyncio's 64 KiB stream limit plays no part.  Outgoing lines
over the daemon's max_message_bytes are never sent (see _core).
"""

import asyncio
import contextvars
import os
import queue
import threading
from typing import Any, Awaitable, Callable, Generator, Literal, cast

from . import _core, errors
from ._core import OutputHook, Result
from ._types import Bindings, Limits, Tools
from .tools import Function, ToolSet

Count = int | Literal["infinity"]

__all__ = ["AsyncClient", "AsyncSession", "LiveOutput"]


class _Conn(_core.ConnCore, asyncio.BufferedProtocol):
    """One connection: owns the transport, the pending futures by request id
    and the executions in flight by id."""

    def __init__(self, client: "AsyncClient", loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(client)
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.next_id = 0
        self.paused = False
        self.drain_waiters: list[asyncio.Future[None]] = []

    # ---------------------------------------------------------- transport events
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(_core.conn_lost_error(exc or "the daemon closed it"))

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        for w in self.drain_waiters:
            if not w.done():
                try:
                    w.set_result(None)
                except RuntimeError:
                    pass
        self.drain_waiters.clear()

    async def drain(self) -> None:
        if self.paused and self.lost is None:
            w = self.loop.create_future()
            self.drain_waiters.append(w)
            await w

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self.input.space()
        except errors.ProtocolError as e:
            self.fail(e)
            return memoryview(bytearray(_core.LineReader.CHUNK))   # read into nothing

    def buffer_updated(self, nbytes: int) -> None:
        try:
            lines = self.input.feed(nbytes)
        except errors.ProtocolError as e:
            self.fail(e)
            return
        for line in lines:
            if self.lost is not None:
                return
            self.message(line)

    def fail(self, err: errors.SandboxdError) -> None:
        """The connection is gone: every waiting call raises err, every tool
        task is cancelled."""
        if self.lost is not None:
            return
        self.lost = err
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                try:
                    fut.set_exception(errors.copy_error(err))
                except RuntimeError:
                    pass                            # a future of a closed loop
        for ex in list(self.executions.values()):
            ex.done = True
            for t in list(ex.tasks):
                try:
                    t.cancel()
                except RuntimeError:
                    pass
        self.resume_writing()
        if self.transport is not None:
            try:
                self.transport.close()
            except RuntimeError:
                pass        # its loop is closed: the transport closes its socket when collected

    def write(self, line: bytes) -> None:
        if self.lost is None and self.transport is not None:
            self.transport.write(line)

    # ---------------------------------------------------------- incoming messages
    def answered(self, rid: Any, msg: dict[str, Any]) -> None:
        fut = self.pending.pop(rid, None)
        if fut is None or fut.done():
            return
        if "error" in msg:
            fut.set_exception(errors.error_from_wire(msg["error"]))
        else:
            fut.set_result(msg.get("result"))

    def show(self, fn: OutputHook, text: str) -> None:
        _call_hook(fn, text, self.loop)

    def run_tool(self, ex: _core.Execution, tid: Any, f: Function, args: list[Any]) -> None:
        if f.inline:                                # quick by its author's word: no task
            self.write(_core.tool_line(tid, f.fn, args, self.info, ex))
        elif f.is_async:
            ex.tasks.add(self.loop.create_task(self.tool_task(ex, tid, f, args)))
        else:
            self.client._pool().submit(self._thread_job(ex, tid, f, args))

    def _thread_job(self, ex: _core.Execution, tid: Any, f: Function,
                    args: list[Any]) -> Callable[[], None]:
        """The job for a plain-function tool: run in a tool thread, answered from
        the loop (dropped when the execution has ended meanwhile)."""
        ctx, loop, info = contextvars.copy_context(), self.loop, self.info

        def job() -> None:
            fatal = None
            try:
                line = _core.tool_line(tid, ctx.run, (f.fn, *args), info, ex)
            except BaseException as e:              # SystemExit: end the execution, then it
                fatal = e
                line = _core.fatal_line(tid, e, info, ex)
            try:
                loop.call_soon_threadsafe(self._thread_done, ex, line, fatal)
            except RuntimeError:
                pass                                # the loop is closed
        return job

    def _thread_done(self, ex: _core.Execution, line: bytes, fatal: BaseException | None) -> None:
        if not ex.done:
            self.write(line)
        if fatal is not None:
            raise fatal

    async def tool_task(self, ex: _core.Execution, tid: Any, f: Function,
                        args: list[Any]) -> None:
        try:
            line = _core.answer_line(tid, await f.fn(*args), None, self.info, ex)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            line = _core.answer_line(tid, exc=e, info=self.info, ex=ex)
        except BaseException as e:                  # SystemExit, KeyboardInterrupt: stop it all
            if not ex.done:
                self.write(_core.fatal_line(tid, e, self.info, ex))
            raise
        finally:
            ex.tasks.discard(asyncio.current_task())
        if not ex.done:
            self.write(line)
            if self.paused:
                await self.drain()

    # ---------------------------------------------------------- requests
    async def call(self, method: str, params: Any, ex: _core.Execution | None = None,
                   deadline: float | None = None) -> Any:
        if self.lost is not None:
            raise errors.copy_error(self.lost)
        self.next_id += 1
        rid = self.next_id
        line = _core.request_line(rid, method, params, self.info)
        fut: asyncio.Future[Any] = self.loop.create_future()
        self.pending[rid] = fut
        if ex is not None:
            ex.rid = rid
            self.executions[rid] = ex
        handle = None
        try:
            self.write(line)
            if deadline is not None:
                handle = self.loop.call_later(deadline, self._deadline, rid, fut, deadline)
            if self.paused:
                await self.drain()
            return await fut
        except asyncio.CancelledError:
            if not fut.done() or fut.cancelled():   # cancelled while waiting (or draining)
                self.write(_core.cancel_line(rid))
            raise
        finally:
            self.pending.pop(rid, None)
            if handle is not None:
                handle.cancel()
            if ex is not None:
                ex.done = True
                self.executions.pop(rid, None)
                for t in list(ex.tasks):
                    t.cancel()

    def _deadline(self, rid: int, fut: "asyncio.Future[Any]", secs: float) -> None:
        if fut.done():
            return
        fut.set_exception(_core.deadline_error(secs, self.client.deadline_grace))
        self.write(_core.cancel_line(rid))


class _ToolThreads:
    """Up to n threads for the tools that are plain functions.  A job runs
    the tool and encodes its answer in the thread; the loop only writes the
    line (call_soon_threadsafe), with no future or task in between.  Threads
    start when no idle one is left and end at shutdown()."""

    def __init__(self, n: int) -> None:
        self.n = max(1, n)
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0                   # threads waiting for a job
        self.queued = 0                 # jobs not taken yet

    def submit(self, job: Callable[[], None]) -> None:
        with self.lock:
            self.queued += 1
            start = self.queued > self.idle and self.threads < self.n
            if start:
                self.threads += 1
        if start:
            threading.Thread(target=self._work, name="sandboxd-tool-%d" % self.threads,
                             daemon=True).start()
        self.jobs.put(job)

    def _work(self) -> None:
        while True:
            with self.lock:
                self.idle += 1
            job = self.jobs.get()
            with self.lock:
                self.idle -= 1
                self.queued -= 1
            if job is None:
                return
            job()

    def shutdown(self) -> None:
        with self.lock:
            self.queued += self.threads
        for _ in range(self.threads):
            self.jobs.put(None)


def _call_hook(fn: OutputHook, text: str, loop: asyncio.AbstractEventLoop) -> None:
    try:
        r = fn(text)
        if asyncio.iscoroutine(r):
            loop.create_task(r)
    except Exception:
        pass                                        # a broken output hook must not stop the reader


class AsyncClient(_core.ClientCore):
    """The asyncio client (client/python/README.md).

        async with sandboxd.AsyncClient() as c:
            r = await c.execute("return Weather.get('Paris').temp",
                                tools={"Weather": {"get": get_weather}})

    socket: the daemon's socket; default $SANDBOXD_SOCKET, then
    /run/sandboxd/sandboxd.sock.  tool_threads: the size of the thread pool
    that runs tools that are not coroutine functions.  deadline_grace: an
    execute raises LimitExceeded (kind timeout, data["client"] true) when no
    answer came within timeout_ms plus this many seconds (None: no deadline).
    """

    _conn: _Conn | None
    _threads: _ToolThreads | None

    def __init__(self, socket: "str | os.PathLike[str] | None" = None, *,
                 connect_timeout: float = 5.0, tool_threads: int = 32,
                 deadline_grace: float | None = _core.DEADLINE_GRACE_S) -> None:
        super().__init__(socket, connect_timeout, tool_threads, deadline_grace)
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> "AsyncClient":
        await self._connection()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (its executions are cancelled by the daemon)."""
        self._drop_connection()
        if self._threads is not None:
            self._threads.shutdown()
            self._threads = None

    def _pool(self) -> _ToolThreads:
        if self._threads is None:
            self._threads = _ToolThreads(self.tool_threads)
        return self._threads

    async def _connection(self) -> _Conn:
        c = self._conn
        loop = asyncio.get_running_loop()
        if c is not None and c.lost is None and c.loop is loop:
            return c
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop     # a client outlives a loop
        async with self._lock:
            c = self._conn
            if c is not None and c.loop is not loop:
                c.fail(errors.DaemonUnavailable("the event loop of this connection is gone"))
            if c is None or c.lost is not None or c.loop is not loop:
                self._conn = None
                c = self._conn = await self._open()
            return c

    async def _open(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_unix_connection(lambda: _Conn(self, loop),
                                                            self.socket_path)
        except (OSError, TimeoutError) as e:
            raise self._connect_error(e) from e
        try:
            conn.described(await conn.call("describe", None))
        except BaseException:
            conn.fail(errors.DaemonUnavailable("connection abandoned"))
            raise
        return conn

    async def _call(self, method: str, params: Any = None) -> Any:
        conn = await self._connection()
        return await conn.call(method, params)

    # ---------------------------------------------------------- methods
    async def execute(self, code: str, *, tools: Tools | None = None,
                      bindings: Bindings | None = None, timeout_ms: Count | None = None,
                      limits: Limits | None = None, stream_output: OutputHook | None = None,
                      max_tool_calls: Count | None = None) -> Result:
        """Run a chunk; return a Result or raise a SandboxdError subclass.

        tools: {table name: functions} (see sandboxd.tools); bindings: those of
        an earlier Result; timeout_ms, limits: as the protocol's;
        stream_output: a callable receiving live output text; max_tool_calls:
        the number of tool calls this execution may make."""
        conn = await self._connection()
        return await self._execute(conn, code, ToolSet(tools), bindings, timeout_ms, limits,
                                   stream_output, max_tool_calls, None)

    def stream(self, code: str, *, tools: Tools | None = None, bindings: Bindings | None = None,
               timeout_ms: Count | None = None, limits: Limits | None = None,
               max_tool_calls: Count | None = None) -> "LiveOutput":
        """execute(), its live output as an async iterator (see LiveOutput):

            async with client.stream(code, tools=tools) as run:
                async for text in run:
                    print(text, end="")
            run.result.value
        """
        def run(hook: OutputHook) -> Awaitable[Result]:
            return self.execute(code, tools=tools, bindings=bindings, timeout_ms=timeout_ms,
                                limits=limits, stream_output=hook, max_tool_calls=max_tool_calls)
        return LiveOutput(run)

    async def _execute(self, conn: _Conn, code: str, toolset: ToolSet | None,
                       bindings: Bindings | None, timeout_ms: Count | None,
                       limits: Limits | None, stream: OutputHook | None,
                       max_tool_calls: Count | None, session: str | None) -> Result:
        params, ex, deadline = _core.start_execute(conn.info, code, toolset, bindings,
                                                   timeout_ms, limits, stream, max_tool_calls,
                                                   session, self.deadline_grace)
        try:
            return ex.finish(await conn.call("execute", params, ex, deadline), conn.show)
        except errors.SandboxdError as e:
            raise ex.failed(e, conn.show)

    async def check(self, code: str, *, tools: Tools | None = None) -> None:
        """Compile code in a worker: None when it compiles, else LuaError."""
        await self._call("check", self._check_params(code, tools))

    async def binding_names(self, bindings: Bindings) -> list[str]:
        """The names the daemon gives the globals in `bindings`."""
        return cast("list[str]", await self._call("binding_names", {"bindings": bindings}))

    async def prompt_info(self, *, session: bool = False) -> dict[str, Any]:
        """The daemon's prompt texts (cached per client)."""
        key = bool(session)
        if key not in self._prompt_info:
            self._prompt_info[key] = await self._call("prompt_info", self._prompt_params(key))
        return cast("dict[str, Any]", self._prompt_info[key])

    async def describe(self) -> dict[str, Any]:
        return cast("dict[str, Any]", await self._call("describe"))

    async def ping(self) -> Any:
        return await self._call("ping")

    async def features(self) -> frozenset[str]:
        """The 1.1 capabilities the daemon names in describe (a frozenset)."""
        return (await self._connection()).info.features

    def session(self, *, tools: Tools | None = None, bindings: Bindings | None = None,
                timeout_ms: Count | None = None, limits: Limits | None = None,
                daemon: bool | None = None) -> "AsyncSession":
        """A session (see SessionCore for the rules), opened on its first use
        or on entering it as a context manager."""
        return AsyncSession(self, tools, bindings, timeout_ms, limits, daemon)

    async def system_prompt(self, tools: Tools | None = None, *, session: bool = False) -> str:
        from .render import system_prompt
        return system_prompt(tools, await self.prompt_info(session=session))


class AsyncSession(_core.SessionCore):
    """A conversation's sandbox state (the rules: SessionCore)."""

    client: AsyncClient

    async def __aenter__(self) -> "AsyncSession":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> _Conn:
        self._check_open()
        conn = await self.client._connection()
        p = self._open_params(conn)
        if p is not None:
            self._opened(conn, await conn.call("session/open", p))
        return conn

    async def execute(self, code: str, *, timeout_ms: Count | None = None,
                      limits: Limits | None = None, stream_output: OutputHook | None = None,
                      max_tool_calls: Count | None = None) -> Result:
        args = self._execute_args(await self.open(), code, timeout_ms, limits, stream_output,
                                  max_tool_calls)
        try:
            return self._executed(await self.client._execute(*args))
        except errors.SandboxdError as e:
            self._failed(e)
            raise

    def stream(self, code: str, *, timeout_ms: Count | None = None, limits: Limits | None = None,
               max_tool_calls: Count | None = None) -> "LiveOutput":
        """execute() in this session, its live output as an async iterator
        (see LiveOutput)."""
        def run(hook: OutputHook) -> Awaitable[Result]:
            return self.execute(code, timeout_ms=timeout_ms, limits=limits, stream_output=hook,
                                max_tool_calls=max_tool_calls)
        return LiveOutput(run)

    async def snapshot(self) -> dict[str, Any]:
        """{"bindings": ..., "binding_names": [...]}: the session's globals as
        bindings (for a checkpoint, a new session or a stateless execute)."""
        conn = await self.open()
        if not self.stateful:
            return self._local_snapshot()
        return cast("dict[str, Any]", await conn.call("session/snapshot", {"session": self.id}))

    async def close(self) -> None:
        """End the session (the daemon's worker is gone when this returns)."""
        sid, conn = self._closing()
        if sid is not None:
            try:
                await conn.call("session/close", {"session": sid})
            except errors.SessionNotFound:
                pass



class LiveOutput:
    """One execute's live output (the daemon's execution/output) as an async
    iterator of text chunks, in order; with a daemon that cannot stream, the
    whole output comes as one chunk at the end.  The execution starts on the
    first `async for`, `await` or `async with`.

    The iteration ends when the execution does: then .result is the Result,
    or the execution's error (a SandboxdError) is raised from the `async
    for`.  `await run` waits for the end and returns the Result
    (output not yet taken stays in the iterator).  Leaving `async with`
    before the end cancels the execution, as aclose() does; a loop left
    with `break` outside one lets it run on.
    """

    def __init__(self, run: Callable[[OutputHook], Awaitable[Result]]) -> None:
        self._run = run
        self._texts: asyncio.Queue[str | None] | None = None
        self._task: asyncio.Task[Result] | None = None
        self._result: Result | None = None

    @property
    def result(self) -> Result:
        """The Result, once the execution has ended well (RuntimeError before)."""
        if self._result is None:
            raise RuntimeError("the execution has not ended, or it failed")
        return self._result

    def _start(self) -> "tuple[asyncio.Task[Result], asyncio.Queue[str | None]]":
        if self._task is None or self._texts is None:
            texts: asyncio.Queue[str | None] = asyncio.Queue()
            self._texts = texts
            self._task = asyncio.get_running_loop().create_task(
                _awaited(self._run(texts.put_nowait)))
            self._task.add_done_callback(lambda _: texts.put_nowait(None))
        return self._task, self._texts

    def __aiter__(self) -> "LiveOutput":
        return self

    async def __anext__(self) -> str:
        task, texts = self._start()
        text = await texts.get()
        if text is None:
            texts.put_nowait(None)                  # the end, for every later call too
            self._result = await task               # raises the execution's error
            raise StopAsyncIteration
        return text

    def __await__(self) -> Generator[Any, None, Result]:
        return self._wait().__await__()

    async def _wait(self) -> Result:
        task, _ = self._start()
        self._result = await task
        return self._result

    async def __aenter__(self) -> "LiveOutput":
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the execution if it is still running ($/cancelRequest) and
        wait until it has ended."""
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
            await asyncio.wait([task])              # a cancel of the caller still propagates
        if not task.cancelled():
            task.exception()                        # taken: asyncio does not log it


async def _awaited(a: Awaitable[Result]) -> Result:
    return await a
