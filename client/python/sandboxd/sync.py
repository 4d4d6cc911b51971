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

Ctrl-C (KeyboardInterrupt) while execute waits sends $/cancelRequest, waits
up to 2 s for the daemon to confirm, then re-raises KeyboardInterrupt.  The
client-side deadline and the size guards are those of the async client.
"""

import asyncio
import collections
import concurrent.futures
import inspect
import itertools
import json
import socket as _socket
import struct
import threading
import time

from . import _core, errors
from ._core import Execution, Info, Result
from .tools import ToolSet

__all__ = ["Client", "Session"]

_loads = json.loads
_monotonic = time.monotonic
_TICK = struct.pack("ll", 0, 50000)         # 50 ms: how late a deadline may be noticed


class _Slot:
    __slots__ = ("done", "result", "error")

    def __init__(self):
        self.done = False
        self.result = None
        self.error = None


class _Conn:
    """One connection of a Client: the socket, the answers waited for by
    request id, the executions by id, and which thread reads now."""

    def __init__(self, client, sock):
        self.client = client
        self.sock = sock
        self.wlock = threading.Lock()
        self.mutex = threading.Lock()               # the state below; `with` on it is cheap
        self.cond = threading.Condition(self.mutex)
        self.waiting = 0                            # threads in cond.wait
        self.reader = None
        self.lines = collections.deque()
        self.input = _core.LineReader(_core.BOOT_LINE_LIMIT)
        self.pending = {}
        self.executions = {}
        self.info = None
        self.lost = None
        self.ids = itertools.count(1)

    def fail(self, err):
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

    def write(self, line):
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
    def call(self, method, params, ex=None, deadline=None):
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
            end = None if deadline is None else _monotonic() + deadline
            if not self.wait(slot, end):
                self.write(_core.cancel_line(rid))
                raise _core.deadline_error(deadline, self.client.deadline_grace)
        except (KeyboardInterrupt, SystemExit):
            self.interrupted(rid, slot)
            raise
        finally:
            with self.mutex:
                self.pending.pop(rid, None)
                if ex is not None:
                    ex.done = True
                    self.executions.pop(rid, None)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def interrupted(self, rid, slot):
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

    def wait(self, slot, end):
        """Until slot is answered (True) or `end` passes (False); this thread
        reads while no other does."""
        me = threading.get_ident()
        cond = self.cond
        while True:
            with self.mutex:
                while True:
                    if slot.done:
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
                ok = self.read_some(slot, end)
            finally:
                with self.mutex:
                    self.reader = prev
                    if self.waiting:
                        cond.notify_all()
            if not ok:
                return slot.done

    def read_some(self, slot, end):
        """Dispatch what is buffered, else one recv; False when end passed.
        The socket blocks, with SO_RCVTIMEO as a tick to look at the clock:
        one system call per read and per write (a socket timeout would add
        a poll to each)."""
        if self.dispatch_buffered(slot):
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
            self.fail(_core.conn_lost_error("the daemon closed it"))
            raise errors.copy_error(self.lost)
        self.dispatch_buffered(slot)
        return True

    def dispatch_buffered(self, slot):
        """Handle the whole lines received, in order, each taken out before it
        is handled (so a tool that calls this client again reads on
        correctly).  True when `slot` got its answer."""
        lines = self.lines
        while not slot.done:
            if not lines:
                return False
            self.message(lines.popleft())
            if self.lost is not None:
                raise errors.copy_error(self.lost)
        return True

    # ---------------------------------------------------------- incoming messages
    def message(self, line):
        try:
            msg = _loads(line.decode("utf-8"))
        except ValueError:
            if not line.strip():
                return
            self.fail(errors.ProtocolError("the daemon sent a line that is not JSON: %r"
                                           % line[:200]))
            return
        if type(msg) is not dict:
            self.fail(errors.ProtocolError("the daemon sent a non-object message"))
            return
        method = msg.get("method")
        if method is not None:
            if method == "tool/call" and "id" in msg:
                self.tool_call(msg)
            elif method == "execution/output":
                ex = self._execution(msg.get("params"))
                text = msg["params"].get("text") if ex is not None else None
                if ex is not None and ex.stream is not None and isinstance(text, str):
                    _hook(ex.stream, text)
            return
        rid = msg.get("id")
        if type(rid) not in (int, str):
            err = msg.get("error")
            if rid is None and isinstance(err, dict):
                e = errors.error_from_wire(err)
                if e.kind in ("forbidden", "busy"):
                    self.fail(e)
            return
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

    def _execution(self, params):
        if type(params) is not dict:
            return None
        eid = params.get("execution_id")
        return self.executions.get(eid) if type(eid) in (int, str) else None

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
        pool = self.client._pool()
        if pool is None:
            self.serve(ex, tid, f, args)
        else:
            pool.submit(self.serve, ex, tid, f, args)

    def serve(self, ex, tid, f, args):
        try:
            v = f.fn(*args)
            if f.is_async or inspect.isawaitable(v):
                v = asyncio.run(_awaited(v))
            line = _core.answer_line(tid, v, None, self.info, ex)
        except Exception as e:
            line = _core.answer_line(tid, exc=e, info=self.info, ex=ex)
        except BaseException as e:                  # SystemExit in a pool thread: stop it all
            if threading.current_thread() is not threading.main_thread() and not ex.done:
                self.write(_core.answer_line(tid, exc=errors.ToolAbort(
                    "%s in the tool" % type(e).__name__), info=self.info, ex=ex))
            raise
        if not ex.done:
            try:
                self.write(line)
            except errors.SandboxdError:
                pass                                # the waiting call reports the loss


async def _awaited(v):
    return await v


def _hook(fn, text):
    try:
        fn(text)
    except Exception:
        pass


class Client:
    """The blocking client (client/python/README.md).

        with sandboxd.Client() as c:
            r = c.execute("return 1 + 1")

    socket: default $SANDBOXD_SOCKET, then /run/sandboxd/sandboxd.sock.
    tool_threads: 0 (default) serves tool calls in the reading thread, N > 0
    in a pool of N threads.  deadline_grace: as AsyncClient's.
    """

    def __init__(self, socket=None, *, connect_timeout=5.0, tool_threads=0,
                 deadline_grace=_core.DEADLINE_GRACE_S):
        self.deadline_grace = deadline_grace
        self.socket_path = _core.socket_path(socket)
        self.connect_timeout = connect_timeout
        self.tool_threads = tool_threads
        self._conn = None
        self._lock = threading.Lock()
        self._threads = None
        self._prompt_info = {}

    def __enter__(self):
        self._connection()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        c, self._conn = self._conn, None
        if c is not None:
            c.fail(errors.DaemonUnavailable("the client was closed"))
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _pool(self):
        if not self.tool_threads:
            return None
        with self._lock:
            if self._threads is None:
                self._threads = concurrent.futures.ThreadPoolExecutor(
                    self.tool_threads, thread_name_prefix="sandboxd-tool")
            return self._threads

    def _connection(self):
        c = self._conn
        if c is not None and c.lost is None:
            return c
        with self._lock:
            c = self._conn
            if c is None or c.lost is not None:
                self._conn = None
                c = self._conn = self._open()
            return c

    def _open(self):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(self.connect_timeout)
            s.connect(self.socket_path)
        except OSError as e:
            s.close()
            raise errors.DaemonUnavailable("cannot connect to sandboxd at %s: %s"
                                           % (self.socket_path, e)) from e
        s.settimeout(None)
        s.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVTIMEO, _TICK)
        conn = _Conn(self, s)
        try:
            info = Info(conn.call("describe", None, None, self.connect_timeout + 5.0))
        except BaseException:
            conn.fail(errors.DaemonUnavailable("connection abandoned"))
            raise
        conn.info = info
        conn.input.limit = info.line_limit
        return conn

    def _call(self, method, params=None):
        return self._connection().call(method, params)

    # ---------------------------------------------------------- methods
    def execute(self, code, *, tools=None, bindings=None, timeout_ms=None, limits=None,
                stream_output=None, max_tool_calls=None):
        """Run a chunk; return a Result or raise a SandboxdError subclass (see
        AsyncClient.execute)."""
        return self._execute(self._connection(), code, ToolSet(tools), bindings, timeout_ms,
                             limits, stream_output, max_tool_calls, None)

    def _execute(self, conn, code, toolset, bindings, timeout_ms, limits, stream,
                 max_tool_calls, session):
        info = conn.info
        params, budget = _core.execute_params(code, toolset, bindings, timeout_ms, limits, stream,
                                              max_tool_calls, info, session)
        live = "stream_output" in params
        ex = Execution(None, toolset, budget, stream, live)
        deadline = _core.deadline_s(timeout_ms, info, self.deadline_grace)
        try:
            r = Result.from_wire(conn.call("execute", params, ex, deadline))
        except errors.SandboxdError as e:
            e = _core.execute_error(e, ex)
            if stream is not None and not live and e.output:
                _hook(stream, e.output)
            raise e
        if stream is not None and not live and r.output:
            _hook(stream, r.output)
        return r

    def check(self, code, *, tools=None):
        params = {"code": code}
        ts = ToolSet(tools)
        if ts:
            params["tools"] = ts.wire
        self._call("check", params)

    def binding_names(self, bindings):
        return self._call("binding_names", {"bindings": bindings})

    def prompt_info(self, *, session=False):
        key = bool(session)
        if key not in self._prompt_info:
            self._prompt_info[key] = self._call("prompt_info", {"session": True} if key else None)
        return self._prompt_info[key]

    def describe(self):
        return self._call("describe")

    def ping(self):
        return self._call("ping")

    def features(self):
        return self._connection().info.features

    def system_prompt(self, tools=None, *, session=False):
        from .render import system_prompt
        return system_prompt(tools, self.prompt_info(session=session))

    def session(self, *, tools=None, bindings=None, timeout_ms=None, limits=None, daemon=None):
        """A Session (see AsyncSession for the rules); opened on first use."""
        return Session(self, tools, bindings, timeout_ms, limits, daemon)


class Session:
    """The blocking twin of AsyncSession (same rules and attributes)."""

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
        self.stateful = None
        self._conn = None

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self):
        if self.closed:
            raise errors.make_error("session_not_found", "this session was closed")
        conn = self.client._connection()
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
            r = conn.call("session/open", p)
            if not isinstance(r, dict) or not isinstance(r.get("session"), str):
                raise errors.ProtocolError("session/open answered %r" % (r,))
            self.id, self._conn = r["session"], conn
            self.restarts += 1
        return conn

    def execute(self, code, *, timeout_ms=None, limits=None, stream_output=None,
                max_tool_calls=None):
        conn = self.open()
        if not self.stateful:
            lim = dict(self.limits, **(limits or {}))
            r = self.client._execute(conn, code, self.toolset, self.bindings,
                                     timeout_ms if timeout_ms is not None else self.timeout_ms,
                                     lim, stream_output, max_tool_calls, None)
            self.bindings = r.bindings if r.bindings is not None else []
            return r
        try:
            return self.client._execute(conn, code, self.toolset, None,
                                        timeout_ms if timeout_ms is not None else self.timeout_ms,
                                        limits, stream_output, max_tool_calls, self.id)
        except errors.SandboxdError as e:
            if e.session_closed or e.kind == "session_not_found" or isinstance(
                    e, errors.DaemonUnavailable):
                self.id = None
            raise

    def snapshot(self):
        conn = self.open()
        if not self.stateful:
            return {"bindings": self.bindings, "binding_names": [p[0] for p in self.bindings]}
        return conn.call("session/snapshot", {"session": self.id})

    def close(self):
        if self.closed:
            return
        self.closed = True
        sid, conn, self.id = self.id, self._conn, None
        if sid is not None and conn is not None and conn.lost is None:
            try:
                conn.call("session/close", {"session": sid})
            except errors.SessionNotFound:
                pass
