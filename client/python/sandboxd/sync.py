"""sandboxd.sync - Client: the blocking client, for scripts and notebooks.

The same surface as AsyncClient, as plain methods.  One connection per
client, opened on the first call and again on the call after the daemon
went away.  There is no reader thread: a thread waiting for an answer reads
the connection itself, and when several threads share the client, one of
them reads at a time and hands each answer to the thread that waits for it
(leader/follower), so several executions may be in flight on one connection.

Tool calls are served by the thread that is reading, inline, in the order
they arrive: a tool runs in the thread that called execute (when one thread
uses the client), which suits thread-bound objects such as sqlite3
connections.  With tool_threads=N they run in a pool of N threads instead,
so the calls of `parallel` overlap.  A coroutine function tool is run with
asyncio.run.

stream() gives the live output as an iterator (LiveOutput): the iterating
thread reads, a step at a time (_Execution), and a loop left early cancels
the execution and reads until the daemon has ended it.

Ctrl-C (KeyboardInterrupt) while execute waits sends $/cancelRequest, waits
up to 2 s for the daemon to confirm, then re-raises KeyboardInterrupt.  The
client-side deadline and the size guards are those of the async client.
"""

import asyncio
import collections
import concurrent.futures
import inspect
import itertools
import socket as _socket
import struct
import os
import threading
import time
from typing import Any, Callable, Iterator, Literal, cast

from . import _core, errors
from ._core import OutputHook, Result
from ._types import Bindings, Limits, Tools
from .tools import Function, ToolSet

Count = int | Literal["infinity"]

__all__ = ["Client", "Session", "LiveOutput"]

_monotonic = time.monotonic
_TICK = struct.pack("ll", 0, 50000)         # 50 ms: how late a deadline may be noticed


class _Slot:
    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = False
        self.result: Any = None
        self.error: errors.SandboxdError | None = None

    def answer(self) -> Any:
        """The answer's result, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.result


class _Conn(_core.ConnCore):
    """One connection of a Client: the socket, the answers waited for by
    request id (slots), and which thread reads now."""

    def __init__(self, client: "Client", sock: _socket.socket) -> None:
        super().__init__(client)
        self.sock = sock
        self.wlock = threading.Lock()
        self.mutex = threading.Lock()               # the state below; `with` on it is cheap
        self.cond = threading.Condition(self.mutex)
        self.waiting = 0                            # threads in cond.wait
        self.reader: int | None = None
        self.lines: collections.deque[bytes] = collections.deque()
        self.ids = itertools.count(1)

    def fail(self, err: errors.SandboxdError) -> None:
        with self.mutex:
            if self.lost is not None:
                return
            self.lost = err
            for slot in self.pending.values():
                if not slot.done:
                    slot.error, slot.done = errors.copy_error(err), True
            for ex in self.executions.values():
                ex.done = True
            self.cond.notify_all()
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def write(self, line: bytes) -> None:
        with self.wlock:
            if self.lost is not None:
                raise errors.copy_error(self.lost)
            try:
                self.sock.sendall(line)
            except OSError as e:
                err = _core.conn_lost_error(e)
                self.fail(err)
                raise errors.copy_error(err) from e

    # ---------------------------------------------------------- requests
    def call(self, method: str, params: Any, ex: _core.Execution | None = None,
             deadline: float | None = None) -> Any:
        rid, slot = self.begin(method, params, ex)
        try:
            self.wait_answer(rid, slot, None if deadline is None else _monotonic() + deadline,
                             deadline)
        finally:
            self.settle(rid, ex)
        return slot.answer()

    def begin(self, method: str, params: Any,
              ex: _core.Execution | None = None) -> tuple[int, "_Slot"]:
        """Send a request: its answer goes to the slot returned (wait_answer reads
        it); settle(rid, ex) once it is no longer waited for."""
        if self.lost is not None:
            raise errors.copy_error(self.lost)
        rid = next(self.ids)
        line = _core.request_line(rid, method, params, self.info)
        slot = _Slot()
        with self.mutex:
            self.pending[rid] = slot
            if ex is not None:
                ex.rid = rid
                self.executions[rid] = ex
        try:
            self.write(line)
        except (KeyboardInterrupt, SystemExit):
            self.interrupted(rid, slot)
            self.settle(rid, ex)
            raise
        except BaseException:
            self.settle(rid, ex)
            raise
        return rid, slot

    def wait_answer(self, rid: int, slot: "_Slot", end: float | None, deadline: float | None,
                    ready: Callable[[], bool] | None = None) -> bool:
        """Read until slot is answered (True) or ready() holds (False).  Past
        `end`, cancel the request and raise the deadline error; on Ctrl-C,
        cancel it (interrupted) and re-raise."""
        try:
            if not self.wait(slot, end, ready):
                self.write(_core.cancel_line(rid))
                raise _core.deadline_error(deadline or 0.0, self.client.deadline_grace)
        except (KeyboardInterrupt, SystemExit):
            self.interrupted(rid, slot)
            raise
        return slot.done

    def settle(self, rid: int, ex: _core.Execution | None) -> None:
        """Request rid is no longer waited for: a late answer is dropped."""
        with self.mutex:
            self.pending.pop(rid, None)
            if ex is not None:
                ex.done = True
                self.executions.pop(rid, None)

    def wake(self) -> None:
        """Wake the threads waiting for their turn to read (something they wait
        for may have come)."""
        with self.mutex:
            if self.waiting:
                self.cond.notify_all()

    def interrupted(self, rid: int, slot: _Slot) -> None:
        """Ctrl-C during a call: cancel it and read on until the daemon confirms,
        so the connection stays in step (a second Ctrl-C drops the connection,
        which cancels everything it started)."""
        try:
            if self.lost is None and not slot.done:
                self.write(_core.cancel_line(rid))
                self.wait(slot, _monotonic() + 2.0)
        except KeyboardInterrupt:
            self.fail(errors.DaemonUnavailable("interrupted"))
        except errors.SandboxdError:
            pass

    def wait(self, slot: _Slot, end: float | None,
             ready: Callable[[], bool] | None = None) -> bool:
        """Until slot is answered or ready() holds (True), or `end` passes
        (False); this thread reads while no other does."""
        me = threading.get_ident()
        cond = self.cond
        while True:
            with self.mutex:
                while True:
                    if slot.done or (ready is not None and ready()):
                        return True
                    if self.lost is not None:
                        raise errors.copy_error(self.lost)
                    if self.reader is None or self.reader == me:
                        prev, self.reader = self.reader, me
                        break
                    left = None if end is None else end - _monotonic()
                    if left is not None and left <= 0:
                        return False
                    self.waiting += 1
                    try:
                        cond.wait(left)
                    finally:
                        self.waiting -= 1
            try:
                ok = self.read_some(slot, end, ready)
            finally:
                with self.mutex:
                    self.reader = prev
                    if self.waiting:
                        cond.notify_all()
            if not ok:
                with self.mutex:
                    return slot.done or (ready is not None and ready())

    def read_some(self, slot: _Slot, end: float | None,
                  ready: Callable[[], bool] | None = None) -> bool:
        """Dispatch what is buffered, else one recv; False when end passed.
        The socket blocks, with SO_RCVTIMEO as a tick to look at the clock:
        one system call per read and per write (a socket timeout would add
        a poll to each)."""
        if self.dispatch_buffered(slot, ready):
            return True
        if end is not None and _monotonic() >= end:
            return False
        try:
            n = self.sock.recv_into(self.input.space())
            if n:
                self.lines.extend(self.input.feed(n))
        except (BlockingIOError, TimeoutError, _socket.timeout):
            return True                             # a tick: look at the deadline again
        except OSError as e:
            err = _core.conn_lost_error(e)
            self.fail(err)
            raise errors.copy_error(err) from e
        except errors.ProtocolError as e:
            self.fail(e)
            raise errors.copy_error(e)
        if not n:
            err = _core.conn_lost_error("the daemon closed it")
            self.fail(err)
            raise errors.copy_error(self.lost or err)
        self.dispatch_buffered(slot, ready)
        return True

    def dispatch_buffered(self, slot: _Slot, ready: Callable[[], bool] | None = None) -> bool:
        """Handle the whole lines received, in order, each taken out before it
        is handled (so a tool that calls this client again reads on
        correctly).  True when `slot` got its answer, or ready() holds (the
        lines after stay for the next reader: a LiveOutput's piece is taken
        before a tool call that came after it is served)."""
        lines = self.lines
        while not slot.done and not (ready is not None and ready()):
            if not lines:
                return False
            self.message(lines.popleft())
            if self.lost is not None:
                raise errors.copy_error(self.lost)
        return True

    # ---------------------------------------------------------- incoming messages
    def answered(self, rid: Any, msg: dict[str, Any]) -> None:
        with self.mutex:
            slot = self.pending.get(rid)
            if slot is None or slot.done:
                return
            if "error" in msg:
                slot.error = errors.error_from_wire(msg["error"])
            else:
                slot.result = msg.get("result")
            slot.done = True
            if self.waiting:
                self.cond.notify_all()

    def show(self, fn: OutputHook, text: str) -> None:
        _hook(fn, text)

    def run_tool(self, ex: _core.Execution, tid: Any, f: Function, args: list[Any]) -> None:
        """In the reading thread, or in the client's pool with tool_threads."""
        pool = self.client._pool()
        if pool is None:
            self.serve(ex, tid, f, args)
        else:
            pool.submit(self.serve, ex, tid, f, args)

    def serve(self, ex: _core.Execution, tid: Any, f: Function, args: list[Any]) -> None:
        try:
            line = _core.tool_line(tid, _call_tool, (f, args), self.info, ex)
        except BaseException as e:                  # SystemExit in a pool thread: stop it all
            if threading.current_thread() is not threading.main_thread() and not ex.done:
                self.write(_core.fatal_line(tid, e, self.info, ex))
            raise
        if not ex.done:
            try:
                self.write(line)
            except errors.SandboxdError:
                pass                                # the waiting call reports the loss


def _call_tool(f: Function, args: list[Any]) -> Any:
    v = f.fn(*args)
    if f.is_async or inspect.isawaitable(v):        # a coroutine function: run to its end
        v = asyncio.run(_awaited(v))
    return v


async def _awaited(v: Any) -> Any:
    return await v


def _hook(fn: OutputHook, text: str) -> None:
    try:
        fn(text)
    except Exception:
        pass


class _Execution:
    """One execute sent on a connection, its answer read a step at a time:
    step() reads until ready() holds or the answer is in; result() reads to
    the end and gives the Result (the error raised, its output shown).  What
    the reading thread meets on the way is served as in call(): tool calls,
    output for the hook."""

    def __init__(self, client: "Client", conn: _Conn, code: str, toolset: ToolSet | None,
                 bindings: Bindings | None, timeout_ms: Count | None, limits: Limits | None,
                 stream: OutputHook | None, max_tool_calls: Count | None,
                 session: str | None) -> None:
        params, self.ex, self.deadline = _core.start_execute(
            conn.info, code, toolset, bindings, timeout_ms, limits, stream, max_tool_calls,
            session, client.deadline_grace)
        self.conn = conn
        try:
            self.rid, self.slot = conn.begin("execute", params, self.ex)
        except errors.SandboxdError as e:
            raise self.ex.failed(e, _hook)
        self.end = None if self.deadline is None else _monotonic() + self.deadline
        self.settled = False

    def step(self, ready: Callable[[], bool] | None = None) -> bool:
        """Read until ready() holds (False) or the execution has ended (True).
        An error ends it too: result() raises it."""
        if self.settled:
            return True
        try:
            if not self.conn.wait_answer(self.rid, self.slot, self.end, self.deadline, ready):
                return False
        except errors.SandboxdError as e:
            self.slot.error, self.slot.done = e, True
        except BaseException:
            self._settle()
            raise
        self._settle()
        return True

    def result(self) -> Result:
        while not self.step():
            pass
        try:
            if not self.slot.done:                  # interrupted, and not confirmed in time
                raise errors.Cancelled("cancelled; the daemon did not confirm it in time",
                                       kind="cancelled", code=-32800)
            return self.ex.finish(self.slot.answer(), _hook)
        except errors.SandboxdError as e:
            raise self.ex.failed(e, _hook)

    def cancel(self) -> None:
        """Cancel the execution if it runs, and read until the daemon says it
        has ended (at most CANCEL_WAIT_S; a later answer is dropped)."""
        if self.settled:
            return
        try:
            self.conn.write(_core.cancel_line(self.rid))
            self.end = _monotonic() + CANCEL_WAIT_S
            while not self.step():
                pass
        except errors.SandboxdError:
            self._settle()                          # the connection is gone: so is the execution

    def _settle(self) -> None:
        if not self.settled:
            self.settled = True
            self.conn.settle(self.rid, self.ex)


CANCEL_WAIT_S = 5.0


class LiveOutput:
    """One execute's live output (the daemon's execution/output) as an
    iterator of text chunks, in order: the blocking twin of
    sandboxd.aio.LiveOutput.  With a daemon that cannot stream, the whole
    output comes as one chunk at the end.  The execution starts on the first
    `for` (or next()), on `with`, or on wait(); the thread that iterates
    reads the connection, and serves the tool calls, as execute() would.

    The iteration ends when the execution does: then .result is the Result,
    or the execution's error (a SandboxdError) is raised from the `for`,
    after the output printed before it.  wait() reads to the end and returns
    the Result (output not yet taken stays in the iterator).

    Leaving the loop before the end (break, return, an exception), leaving
    `with`, or close() cancels the execution and reads until the daemon
    says it has ended, so the worker is free and the connection ready for
    the next call when the loop is left; .result then raises RuntimeError.
    (The loop's iterator is closed when the loop lets go of it: at once in
    CPython; `with` makes it so everywhere.)  One thread uses a LiveOutput.
    """

    def __init__(self, start: "Callable[[OutputHook], _Execution]",
                 finish: "Callable[[_Execution], Result]") -> None:
        self._start_fn = start
        self._finish = finish
        self._run: _Execution | None = None
        self._texts: collections.deque[str] = collections.deque()
        self._result: Result | None = None
        self._error: errors.SandboxdError | None = None
        self._ended = False

    @property
    def result(self) -> Result:
        """The Result, once the execution has ended well (RuntimeError before)."""
        if self._result is None:
            raise RuntimeError("the execution has not ended, or it failed or was cancelled")
        return self._result

    def _started(self) -> _Execution:
        if self._run is None:
            run: _Execution | None = None

            def hook(text: str) -> None:
                self._texts.append(text)
                if run is not None:
                    run.conn.wake()                 # a thread waiting for its turn to read
            run = self._run = self._start_fn(hook)
        return self._run

    def _ready(self) -> bool:
        return bool(self._texts)

    def _end(self) -> None:
        """The execution has ended: take its Result or error."""
        self._ended = True
        assert self._run is not None
        try:
            self._result = self._finish(self._run)
        except errors.SandboxdError as e:
            self._error = e

    def __iter__(self) -> Iterator[str]:
        return self._chunks()

    def _chunks(self) -> Iterator[str]:
        run = self._started()
        try:
            while True:
                if self._texts:
                    yield self._texts.popleft()
                elif self._ended:
                    break
                elif run.step(self._ready):
                    self._end()
        finally:
            if not self._ended:
                self.close()
        if self._error is not None:
            raise self._error

    def wait(self) -> Result:
        """Read to the end of the execution: its Result, or its error raised."""
        run = self._started()
        if not self._ended:
            while not run.step():
                pass
            self._end()
        if self._error is not None:
            raise self._error
        return self.result

    def __enter__(self) -> "LiveOutput":
        self._started()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the execution if it is still running ($/cancelRequest) and
        read until the daemon says it has ended."""
        if self._run is None or self._ended:
            return
        self._run.cancel()
        self._ended = True
        try:
            self._finish(self._run)                 # a session learns what became of it
        except errors.SandboxdError:
            pass


class Client(_core.ClientCore):
    """The blocking client (client/python/README.md).

        with sandboxd.Client() as c:
            r = c.execute("return 1 + 1")

    socket: default $SANDBOXD_SOCKET, then /run/sandboxd/sandboxd.sock.
    tool_threads: 0 (default) serves tool calls in the reading thread, N > 0
    in a pool of N threads.  deadline_grace: as AsyncClient's.
    """

    _conn: _Conn | None
    _threads: concurrent.futures.ThreadPoolExecutor | None

    def __init__(self, socket: "str | os.PathLike[str] | None" = None, *,
                 connect_timeout: float = 5.0, tool_threads: int = 0,
                 deadline_grace: float | None = _core.DEADLINE_GRACE_S) -> None:
        super().__init__(socket, connect_timeout, tool_threads, deadline_grace)
        self._lock = threading.Lock()

    def __enter__(self) -> "Client":
        self._connection()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (its executions are cancelled by the daemon)."""
        self._drop_connection()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor | None:
        if not self.tool_threads:
            return None
        with self._lock:
            if self._threads is None:
                self._threads = concurrent.futures.ThreadPoolExecutor(
                    self.tool_threads, thread_name_prefix="sandboxd-tool")
            return self._threads

    def _connection(self) -> _Conn:
        c = self._conn
        if c is not None and c.lost is None:
            return c
        with self._lock:
            c = self._conn
            if c is None or c.lost is not None:
                self._conn = None
                c = self._conn = self._open()
            return c

    def _open(self) -> _Conn:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(self.connect_timeout)
            s.connect(self.socket_path)
        except OSError as e:
            s.close()
            raise self._connect_error(e) from e
        s.settimeout(None)
        s.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVTIMEO, _TICK)
        conn = _Conn(self, s)
        try:
            conn.described(conn.call("describe", None, None, self.connect_timeout + 5.0))
        except BaseException:
            conn.fail(errors.DaemonUnavailable("connection abandoned"))
            raise
        return conn

    def _call(self, method: str, params: Any = None) -> Any:
        return self._connection().call(method, params)

    # ---------------------------------------------------------- methods
    def execute(self, code: str, *, tools: Tools | None = None, bindings: Bindings | None = None,
                timeout_ms: Count | None = None, limits: Limits | None = None,
                stream_output: OutputHook | None = None,
                max_tool_calls: Count | None = None) -> Result:
        """Run a chunk; return a Result or raise a SandboxdError subclass (see
        AsyncClient.execute)."""
        return self._execute(self._connection(), code, ToolSet(tools), bindings, timeout_ms,
                             limits, stream_output, max_tool_calls, None)

    def stream(self, code: str, *, tools: Tools | None = None, bindings: Bindings | None = None,
               timeout_ms: Count | None = None, limits: Limits | None = None,
               max_tool_calls: Count | None = None) -> LiveOutput:
        """execute(), its live output as an iterator (see LiveOutput):

            with client.stream(code, tools=tools) as run:
                for text in run:
                    print(text, end="")
            run.result.value
        """
        toolset = ToolSet(tools)

        def start(hook: OutputHook) -> _Execution:
            return _Execution(self, self._connection(), code, toolset, bindings, timeout_ms,
                              limits, hook, max_tool_calls, None)
        return LiveOutput(start, _Execution.result)

    def _execute(self, conn: _Conn, code: str, toolset: ToolSet | None,
                 bindings: Bindings | None, timeout_ms: Count | None, limits: Limits | None,
                 stream: OutputHook | None, max_tool_calls: Count | None,
                 session: str | None) -> Result:
        return _Execution(self, conn, code, toolset, bindings, timeout_ms, limits, stream,
                          max_tool_calls, session).result()

    def check(self, code: str, *, tools: Tools | None = None) -> None:
        """Compile code in a worker: None when it compiles, else LuaError."""
        self._call("check", self._check_params(code, tools))

    def binding_names(self, bindings: Bindings) -> list[str]:
        """The names the daemon gives the globals in `bindings`."""
        return cast("list[str]", self._call("binding_names", {"bindings": bindings}))

    def prompt_info(self, *, session: bool = False) -> dict[str, Any]:
        """The daemon's prompt texts (cached per client)."""
        key = bool(session)
        if key not in self._prompt_info:
            self._prompt_info[key] = self._call("prompt_info", self._prompt_params(key))
        return cast("dict[str, Any]", self._prompt_info[key])

    def describe(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self._call("describe"))

    def ping(self) -> Any:
        return self._call("ping")

    def features(self) -> frozenset[str]:
        """The 1.1 capabilities the daemon names in describe."""
        return self._connection().info.features

    def session(self, *, tools: Tools | None = None, bindings: Bindings | None = None,
                timeout_ms: Count | None = None, limits: Limits | None = None,
                daemon: bool | None = None) -> "Session":
        """A session (see SessionCore for the rules), opened on its first use
        or on entering it as a context manager."""
        return Session(self, tools, bindings, timeout_ms, limits, daemon)

    def system_prompt(self, tools: Tools | None = None, *, session: bool = False) -> str:
        from .render import system_prompt
        return system_prompt(tools, self.prompt_info(session=session))


class Session(_core.SessionCore):
    """The blocking twin of AsyncSession (the rules: SessionCore)."""

    client: Client

    def __enter__(self) -> "Session":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> _Conn:
        self._check_open()
        conn = self.client._connection()
        p = self._open_params(conn)
        if p is not None:
            self._opened(conn, conn.call("session/open", p))
        return conn

    def execute(self, code: str, *, timeout_ms: Count | None = None, limits: Limits | None = None,
                stream_output: OutputHook | None = None,
                max_tool_calls: Count | None = None) -> Result:
        args = self._execute_args(self.open(), code, timeout_ms, limits, stream_output,
                                  max_tool_calls)
        try:
            return self._executed(self.client._execute(*args))
        except errors.SandboxdError as e:
            self._failed(e)
            raise

    def stream(self, code: str, *, timeout_ms: Count | None = None, limits: Limits | None = None,
               max_tool_calls: Count | None = None) -> LiveOutput:
        """execute() in this session, its live output as an iterator (see
        LiveOutput)."""
        def start(hook: OutputHook) -> _Execution:
            return _Execution(self.client, *self._execute_args(self.open(), code, timeout_ms,
                                                               limits, hook, max_tool_calls))

        def finish(run: _Execution) -> Result:
            try:
                return self._executed(run.result())
            except errors.SandboxdError as e:
                self._failed(e)
                raise
        return LiveOutput(start, finish)

    def snapshot(self) -> dict[str, Any]:
        conn = self.open()
        if not self.stateful:
            return self._local_snapshot()
        return cast("dict[str, Any]", conn.call("session/snapshot", {"session": self.id}))

    def close(self) -> None:
        sid, conn = self._closing()
        if sid is not None:
            try:
                conn.call("session/close", {"session": sid})
            except errors.SessionNotFound:
                pass

