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
import json
import queue
import threading

from . import _core, errors
from ._core import Execution, Info, Result
from .tools import ToolSet

__all__ = ["AsyncClient", "AsyncSession"]

_loads = json.loads


class _Conn(asyncio.BufferedProtocol):
    """One connection: owns the transport, the pending futures by request id
    and the executions in flight by id."""

    def __init__(self, client, loop):
        self.client = client
        self.loop = loop
        self.transport = None
        self.reader = _core.LineReader(_core.BOOT_LINE_LIMIT)
        self.pending = {}
        self.executions = {}
        self.info = None
        self.lost = None
        self.next_id = 0
        self.paused = False
        self.drain_waiters = []

    # ---------------------------------------------------------- transport events
    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.fail(_core.conn_lost_error(exc or "the daemon closed it"))

    def pause_writing(self):
        self.paused = True

    def resume_writing(self):
        self.paused = False
        for w in self.drain_waiters:
            if not w.done():
                try:
                    w.set_result(None)
                except RuntimeError:
                    pass
        self.drain_waiters.clear()

    async def drain(self):
        if self.paused and self.lost is None:
            w = self.loop.create_future()
            self.drain_waiters.append(w)
            await w

    def get_buffer(self, sizehint):
        try:
            return self.reader.space()
        except errors.ProtocolError as e:
            self.fail(e)
            return memoryview(bytearray(_core.LineReader.CHUNK))   # read into nothing

    def buffer_updated(self, nbytes):
        try:
            lines = self.reader.feed(nbytes)
        except errors.ProtocolError as e:
            self.fail(e)
            return
        for line in lines:
            if self.lost is not None:
                return
            self.message(line)

    def fail(self, err):
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

    def write(self, line):
        if self.lost is None:
            self.transport.write(line)

    # ---------------------------------------------------------- incoming messages
    def message(self, line):
        try:
            msg = _loads(line.decode("utf-8"))
        except ValueError:                          # UnicodeDecodeError too
            if line.strip():
                self.fail(errors.ProtocolError("the daemon sent a line that is not JSON: %r"
                                               % bytes(line[:200])))
            return
        if type(msg) is not dict:
            self.fail(errors.ProtocolError("the daemon sent a non-object message"))
            return
        method = msg.get("method")
        if method is not None:
            if method == "tool/call" and "id" in msg:
                self.tool_call(msg)
            elif method == "execution/output":
                self.output(msg.get("params"))
            return
        rid = msg.get("id")
        fut = self.pending.pop(rid, None) if type(rid) in (int, str) else None
        if fut is None:
            err = msg.get("error")
            if rid is None and isinstance(err, dict):
                e = errors.error_from_wire(err)
                if e.kind in ("forbidden", "busy"):         # said on connect, then closed
                    self.fail(e)
            return
        if fut.done():
            return
        if "error" in msg:
            fut.set_exception(errors.error_from_wire(msg["error"]))
        else:
            fut.set_result(msg.get("result"))

    def _execution(self, params):
        if type(params) is not dict:
            return None
        eid = params.get("execution_id")
        return self.executions.get(eid) if type(eid) in (int, str) else None

    def output(self, params):
        ex = self._execution(params)
        if ex is not None and ex.stream is not None and not ex.done:
            text = params.get("text")
            if isinstance(text, str):
                _call_hook(ex.stream, text, self.loop)

    def tool_call(self, msg):
        tid = msg["id"]
        params = msg.get("params")
        ex = self._execution(params)
        if ex is None or ex.done:
            self.write(_core.answer_line(tid, exc={"code": _core.TOOL_ERROR_CODE,
                                                   "message": "no execution waits for this call"}))
            return
        f, args = ex.resolve(params)
        if f is None:
            self.write(_core.answer_line(tid, exc=args, info=self.info, ex=ex))
            return
        if f.inline:                                # quick by its author's word: no task
            try:
                line = _core.answer_line(tid, f.fn(*args), None, self.info, ex)
            except Exception as e:
                line = _core.answer_line(tid, exc=e, info=self.info, ex=ex)
            self.write(line)
            return
        if f.is_async:
            ex.tasks.add(self.loop.create_task(self.run_tool(ex, tid, f, args)))
        else:
            self.client._pool().submit(self._thread_job(ex, tid, f, args))

    def _thread_job(self, ex, tid, f, args):
        """The job for a plain-function tool: run in a tool thread, answered from
        the loop (dropped when the execution has ended meanwhile)."""
        ctx, loop, info = contextvars.copy_context(), self.loop, self.info

        def job():
            fatal = None
            try:
                line = _core.answer_line(tid, ctx.run(f.fn, *args), None, info, ex)
            except Exception as e:
                line = _core.answer_line(tid, exc=e, info=info, ex=ex)
            except BaseException as e:              # SystemExit: end the execution, then it
                fatal = e
                line = _core.answer_line(tid, exc=errors.ToolAbort(
                    "%s in the tool" % type(e).__name__), info=info, ex=ex)
            try:
                loop.call_soon_threadsafe(self._thread_done, ex, line, fatal)
            except RuntimeError:
                pass                                # the loop is closed
        return job

    def _thread_done(self, ex, line, fatal):
        if not ex.done:
            self.write(line)
        if fatal is not None:
            raise fatal

    async def run_tool(self, ex, tid, f, args):
        try:
            line = _core.answer_line(tid, await f.fn(*args), None, self.info, ex)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            line = _core.answer_line(tid, exc=e, info=self.info, ex=ex)
        except BaseException as e:                  # SystemExit, KeyboardInterrupt: stop it all
            if not ex.done:
                self.write(_core.answer_line(tid, exc=errors.ToolAbort(
                    "%s in the tool" % type(e).__name__), info=self.info, ex=ex))
            raise
        finally:
            ex.tasks.discard(asyncio.current_task())
        if not ex.done:
            self.write(line)
            if self.paused:
                await self.drain()

    # ---------------------------------------------------------- requests
    async def call(self, method, params, ex=None, deadline=None):
        if self.lost is not None:
            raise errors.copy_error(self.lost)
        self.next_id += 1
        rid = self.next_id
        line = _core.request_line(rid, method, params, self.info)
        fut = self.loop.create_future()
        self.pending[rid] = fut
        if ex is not None:
            ex.rid = rid
            self.executions[rid] = ex
        handle = None
        try:
            self.transport.write(line)
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

    def _deadline(self, rid, fut, secs):
        if fut.done():
            return
        fut.set_exception(_core.deadline_error(secs, self.client.deadline_grace))
        self.write(_core.cancel_line(rid))


class _ToolThreads:
    """Up to n threads for the tools that are plain functions.  A job runs
    the tool and encodes its answer in the thread; the loop only writes the
    line (call_soon_threadsafe), with no future or task in between.  Threads
    start when no idle one is left and end at shutdown()."""

    def __init__(self, n):
        self.n = max(1, n)
        self.jobs = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0                   # threads waiting for a job
        self.queued = 0                 # jobs not taken yet

    def submit(self, job):
        with self.lock:
            self.queued += 1
            start = self.queued > self.idle and self.threads < self.n
            if start:
                self.threads += 1
        if start:
            threading.Thread(target=self._work, name="sandboxd-tool-%d" % self.threads,
                             daemon=True).start()
        self.jobs.put(job)

    def _work(self):
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

    def shutdown(self):
        with self.lock:
            self.queued += self.threads
        for _ in range(self.threads):
            self.jobs.put(None)


def _call_hook(fn, text, loop):
    try:
        r = fn(text)
        if asyncio.iscoroutine(r):
            loop.create_task(r)
    except Exception:
        pass                                        # a broken output hook must not stop the reader


class AsyncClient:
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

    def __init__(self, socket=None, *, connect_timeout=5.0, tool_threads=32,
                 deadline_grace=_core.DEADLINE_GRACE_S):
        self.deadline_grace = deadline_grace
        self.socket_path = _core.socket_path(socket)
        self.connect_timeout = connect_timeout
        self.tool_threads = tool_threads
        self._conn = None
        self._lock = None
        self._lock_loop = None
        self._threads = None
        self._prompt_info = {}

    async def __aenter__(self):
        await self._connection()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        """Close the connection (its executions are cancelled by the daemon)."""
        c, self._conn = self._conn, None
        if c is not None:
            c.fail(errors.DaemonUnavailable("the client was closed"))
        if self._threads is not None:
            self._threads.shutdown()
            self._threads = None

    def _pool(self):
        if self._threads is None:
            self._threads = _ToolThreads(self.tool_threads)
        return self._threads

    async def _connection(self):
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

    async def _open(self):
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_unix_connection(lambda: _Conn(self, loop),
                                                            self.socket_path)
        except (OSError, TimeoutError) as e:
            raise errors.DaemonUnavailable("cannot connect to sandboxd at %s: %s"
                                           % (self.socket_path, e)) from e
        try:
            info = Info(await conn.call("describe", None))
        except BaseException:
            conn.fail(errors.DaemonUnavailable("connection abandoned"))
            raise
        conn.info = info
        conn.reader.limit = info.line_limit
        return conn

    async def _call(self, method, params=None):
        conn = await self._connection()
        return await conn.call(method, params)

    # ---------------------------------------------------------- methods
    async def execute(self, code, *, tools=None, bindings=None, timeout_ms=None, limits=None,
                      stream_output=None, max_tool_calls=None):
        """Run a chunk; return a Result or raise a SandboxdError subclass.

        tools: {table name: functions} (see sandboxd.tools); bindings: those of
        an earlier Result; timeout_ms, limits: as the protocol's;
        stream_output: a callable receiving live output text; max_tool_calls:
        the number of tool calls this execution may make."""
        conn = await self._connection()
        return await self._execute(conn, code, ToolSet(tools), bindings, timeout_ms, limits,
                                   stream_output, max_tool_calls, None)

    async def _execute(self, conn, code, toolset, bindings, timeout_ms, limits, stream,
                       max_tool_calls, session):
        info = conn.info
        params, budget = _core.execute_params(code, toolset, bindings, timeout_ms, limits, stream,
                                              max_tool_calls, info, session)
        live = "stream_output" in params
        ex = Execution(None, toolset, budget, stream, live)
        deadline = _core.deadline_s(timeout_ms, info, self.deadline_grace)
        try:
            r = Result.from_wire(await conn.call("execute", params, ex, deadline))
        except errors.SandboxdError as e:
            e = _core.execute_error(e, ex)
            if stream is not None and not live and e.output:
                _call_hook(stream, e.output, conn.loop)
            raise e
        if stream is not None and not live and r.output:
            _call_hook(stream, r.output, conn.loop)
        return r

    async def check(self, code, *, tools=None):
        """Compile code in a worker: None when it compiles, else LuaError."""
        params = {"code": code}
        ts = ToolSet(tools)
        if ts:
            params["tools"] = ts.wire
        await self._call("check", params)

    async def binding_names(self, bindings):
        return await self._call("binding_names", {"bindings": bindings})

    async def prompt_info(self, *, session=False):
        """The daemon's prompt texts (cached per client)."""
        key = bool(session)
        if key not in self._prompt_info:
            self._prompt_info[key] = await self._call("prompt_info",
                                                      {"session": True} if key else None)
        return self._prompt_info[key]

    async def describe(self):
        return await self._call("describe")

    async def ping(self):
        return await self._call("ping")

    async def features(self):
        """The 1.1 capabilities the daemon names in describe (a frozenset)."""
        return (await self._connection()).info.features

    async def system_prompt(self, tools=None, *, session=False):
        from .render import system_prompt
        return system_prompt(tools, await self.prompt_info(session=session))

    def session(self, *, tools=None, bindings=None, timeout_ms=None, limits=None, daemon=None):
        """A Session (see AsyncSession); opened on its first use or `async with`."""
        return AsyncSession(self, tools, bindings, timeout_ms, limits, daemon)


class AsyncSession:
    """A conversation's sandbox state.

    daemon=None (default): a daemon session (one worker keeps the Lua state,
    functions included) when describe lists "sessions", else a stateless
    session.  daemon=True requires the daemon's; daemon=False never uses it.

    A stateless session holds .bindings and passes them to every execute;
    they change only when an execute succeeds (after an error the previous
    ones stand, as in Legion).  A daemon session keeps its state in the
    daemon; when an error ends it (error.session_closed) or the connection
    is lost, the next execute opens a new one from the initial bindings, and
    .restarts counts how often that happened.
    """

    def __init__(self, client, tools, bindings, timeout_ms, limits, daemon):
        self.client = client
        self.toolset = ToolSet(tools)
        self.initial_bindings = list(bindings or [])
        self.bindings = list(self.initial_bindings)
        self.timeout_ms = timeout_ms
        self.limits = dict(limits or {})
        self.want_daemon = daemon
        self.id = None
        self.restarts = -1
        self.closed = False
        self.stateful = None            # decided on open
        self._conn = None

    async def __aenter__(self):
        await self.open()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def open(self):
        if self.closed:
            raise errors.make_error("session_not_found", "this session was closed")
        conn = await self.client._connection()
        if self.stateful is None:
            has = "sessions" in conn.info.features
            if self.want_daemon and not has:
                raise errors.make_error("method_not_found", "this daemon has no sessions "
                                        "(describe does not list the feature)")
            self.stateful = has if self.want_daemon is None else bool(self.want_daemon)
        if self.stateful and (self.id is None or self._conn is not conn):
            p = {}
            if self.toolset:
                p["tools"] = self.toolset.wire
            if self.initial_bindings:
                p["bindings"] = self.initial_bindings
            if self.timeout_ms is not None:
                p["timeout_ms"] = self.timeout_ms
            if self.limits:
                p["limits"] = self.limits
            r = await conn.call("session/open", p)
            if not isinstance(r, dict) or not isinstance(r.get("session"), str):
                raise errors.ProtocolError("session/open answered %r" % (r,))
            self.id, self._conn = r["session"], conn
            self.restarts += 1
        return conn

    async def execute(self, code, *, timeout_ms=None, limits=None, stream_output=None,
                      max_tool_calls=None):
        conn = await self.open()
        if not self.stateful:
            lim = dict(self.limits, **(limits or {}))
            r = await self.client._execute(conn, code, self.toolset, self.bindings,
                                           timeout_ms if timeout_ms is not None
                                           else self.timeout_ms, lim, stream_output,
                                           max_tool_calls, None)
            self.bindings = r.bindings if r.bindings is not None else []
            return r
        try:
            return await self.client._execute(conn, code, self.toolset, None,
                                              timeout_ms if timeout_ms is not None
                                              else self.timeout_ms, limits, stream_output,
                                              max_tool_calls, self.id)
        except errors.SandboxdError as e:
            if e.session_closed or e.kind == "session_not_found" or isinstance(
                    e, errors.DaemonUnavailable):
                self.id = None
            raise

    async def snapshot(self):
        """{"bindings": ..., "binding_names": [...]}: the session's globals as
        bindings (for a checkpoint, a new session or a stateless execute)."""
        conn = await self.open()
        if not self.stateful:
            return {"bindings": self.bindings,
                    "binding_names": [p[0] for p in self.bindings]}
        return await conn.call("session/snapshot", {"session": self.id})

    async def close(self):
        """End the session (the daemon's worker is gone when this returns)."""
        if self.closed:
            return
        self.closed = True
        sid, conn, self.id = self.id, self._conn, None
        if sid is not None and conn is not None and conn.lost is None:
            try:
                await conn.call("session/close", {"session": sid})
            except errors.SessionNotFound:
                pass
