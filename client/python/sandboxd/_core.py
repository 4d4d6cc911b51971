"""sandboxd._core - what the blocking and the asyncio client share: the
default socket, the connection's knowledge from `describe`, building requests,
the state of one execution, what a connection does with each incoming line
(ConnCore), turning a tool's outcome into the answer line (with the outgoing
size guard), turning an answer into a Result or an exception, the clients'
settings and request parameters (ClientCore), and the rules of a session
(SessionCore).  No I/O happens here: sync.py reads and writes with blocking
calls, aio.py with asyncio; each calls into this module between them.
"""

import json
import os
import re
from typing import Any, Callable, Literal, Sequence, cast

from . import errors, values
from ._types import Bindings, Limits, Stats, Tools
from .tools import Function, ToolSet

# What a connection does with output text: show(callback, text).
Show = Callable[[Callable[[str], object], str], None]
OutputHook = Callable[[str], object]

DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock"
# Incoming lines are refused above this before `describe` has told the real
# limits (a describe answer is a few hundred bytes).
BOOT_LINE_LIMIT = 1 << 20
# Client-side deadline: timeout_ms plus this much (the default), so the
# daemon's own timeout answer (with output and stats) normally arrives first.
DEADLINE_GRACE_S = 2.0
TOOL_ERROR_CODE = 1

_loads: Callable[[str], Any] = json.loads
_dumps: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                                check_circular=False,
                                                separators=(",", ":")).encode


def socket_path(socket: "str | os.PathLike[str] | None" = None) -> str:
    """The socket to use: the argument, else $SANDBOXD_SOCKET, else the default."""
    return os.fspath(socket) if socket else (os.environ.get("SANDBOXD_SOCKET") or DEFAULT_SOCKET)


class LineReader:
    """The incoming byte stream cut into lines, read into one reused buffer
    (recv_into: no allocation per read; a 1 MiB recv() costs page faults on
    every call).  space() is where the next read goes; feed(n) takes n new
    bytes and returns the whole lines that completed.  A partial line longer
    than `limit` raises ProtocolError."""

    CHUNK = 1 << 16

    def __init__(self, limit: int) -> None:
        self.buf = bytearray(self.CHUNK * 4)
        self.len = 0
        self.limit = limit

    def space(self) -> memoryview:
        buf = self.buf
        if len(buf) - self.len < self.CHUNK:
            if self.len > self.limit:
                raise errors.ProtocolError("the daemon sent a line longer than %d bytes"
                                           % self.limit)
            self.buf = buf = buf + bytes(len(buf))          # a new object: no live export
        elif self.len < self.CHUNK and len(buf) > (8 << 20):
            self.buf = buf = buf[:self.len] + bytes(self.CHUNK * 4)   # after a huge line
        return memoryview(buf)[self.len:]

    def feed(self, n: int) -> list[bytes]:
        buf = self.buf
        old, end = self.len, self.len + n
        lines = []
        start = 0
        nl = buf.find(b"\n", old, end)
        while nl >= 0:
            if nl > start:
                lines.append(bytes(buf[start:nl]))
            start = nl + 1
            nl = buf.find(b"\n", start, end)
        if start:
            rest = end - start
            buf[0:rest] = buf[start:end]
            end = rest
        self.len = end
        if end > self.limit:
            raise errors.ProtocolError("the daemon sent a line longer than %d bytes"
                                       % self.limit)
        return lines


class Result:
    """The result of an execute: .value, .bindings (None when a daemon session
    did not return them), .binding_names, .output, .output_truncated, .stats."""

    __slots__ = ("value", "bindings", "binding_names", "output", "output_truncated", "stats")

    value: Any
    bindings: list[Any] | None
    binding_names: list[str]
    output: str
    output_truncated: bool
    stats: Stats

    def __init__(self, value: Any = None, bindings: list[Any] | None = None,
                 binding_names: Sequence[str] = (), output: str = "",
                 output_truncated: bool = False, stats: Stats | None = None) -> None:
        self.value = value
        self.bindings = bindings
        self.binding_names = list(binding_names)
        self.output = output
        self.output_truncated = output_truncated
        self.stats = stats or {}

    @classmethod
    def from_wire(cls, r: object) -> "Result":
        if not isinstance(r, dict):
            raise errors.ProtocolError("execute answered a non-object result: %r" % (r,))
        names = r.get("binding_names")
        if not isinstance(names, list):
            b = r.get("bindings")
            names = [p[0] for p in b if isinstance(p, list) and p] if isinstance(b, list) else []
        st = r.get("stats")
        return cls(r.get("value"), r.get("bindings"), names, r.get("output") or "",
                   bool(r.get("output_truncated")),
                   cast(Stats, st) if isinstance(st, dict) else None)

    def __repr__(self) -> str:
        return "Result(value=%r, binding_names=%r, output=%r)" % (
            self.value, self.binding_names, self.output)


class Info:
    """What a connection learnt from `describe`."""

    def __init__(self, d: object) -> None:
        d = d if isinstance(d, dict) else {}
        self.describe = d
        daemon = _obj(d.get("daemon"))
        maxima = _obj(d.get("maximums"))
        defaults = _obj(d.get("defaults"))
        self.max_message_bytes = _num(daemon.get("max_message_bytes"), 16 << 20)
        self.max_code_bytes = _num(daemon.get("max_code_bytes"), 65536)
        self.default_timeout_ms: Any = defaults.get("timeout_ms", 60000)
        feats = d.get("features")
        self.features = frozenset(f for f in (feats if isinstance(feats, list) else ())
                                  if isinstance(f, str))
        # An answer holds at most a value (max_message_bytes), the output and
        # the bindings (each up to its ceiling), and the envelope.
        self.line_limit = (self.max_message_bytes + _num(maxima.get("max_output_bytes"), 16 << 20)
                           * 2 + _num(maxima.get("max_bindings_bytes"), 16 << 20) * 2 + (1 << 20))


def _obj(v: object) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _num(v: object, dflt: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else dflt


def request_line(rid: int, method: str, params: Any, info: Info | None) -> bytes:
    """The request as a line (bytes).  A line the daemon would refuse for its
    length (and then could not route its answer) raises InvalidRequest here."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    try:
        line = _dumps(msg).encode("utf-8")
    except (TypeError, ValueError) as e:
        try:
            msg["params"] = values.to_jsonable(params)
            line = _dumps(msg).encode("utf-8")
        except values.Unencodable as e2:
            raise errors.make_error("invalid_params", "cannot send %s: %s" % (method, e2)) from e
    if info is not None and len(line) > info.max_message_bytes:
        raise errors.make_error("message_too_large",
                                "the %s request is %d bytes, over the daemon's "
                                "max_message_bytes of %d" % (method, len(line),
                                                             info.max_message_bytes))
    return line + b"\n"


def notification_line(method: str, params: Any) -> bytes:
    return _dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode("utf-8") + b"\n"


def cancel_line(rid: int) -> bytes:
    return notification_line("$/cancelRequest", {"id": rid})


def execute_params(code: str, toolset: ToolSet | None, bindings: Bindings | None,
                   timeout_ms: "int | Literal['infinity'] | None", limits: Limits | None,
                   stream: OutputHook | None, max_tool_calls: "int | Literal['infinity'] | None",
                   info: Info, session: str | None = None
                   ) -> tuple[dict[str, Any], int | None]:
    """(params, client_budget): client_budget is the tool-call budget the
    client enforces itself when the daemon has no max_tool_calls limit."""
    if not isinstance(code, str):
        raise TypeError("code must be a str, got %s" % type(code).__name__)
    p: dict[str, Any] = {"code": code}
    if session is not None:
        p["session"] = session
    else:
        if toolset:
            p["tools"] = toolset.wire
        if bindings:
            p["bindings"] = bindings
    if timeout_ms is not None:
        p["timeout_ms"] = timeout_ms
    lim: dict[str, Any] = dict(limits) if limits else {}
    budget = None
    if max_tool_calls is not None:
        if "max_tool_calls" in info.features:
            lim["max_tool_calls"] = max_tool_calls
        elif max_tool_calls != "infinity":
            budget = int(max_tool_calls)
    if lim:
        p["limits"] = lim
    if stream is not None and "stream_output" in info.features:
        p["stream_output"] = True
    return p, budget


def deadline_s(timeout_ms: object, info: Info, grace: float | None) -> float | None:
    """Seconds the client waits for an execute at most, or None (no deadline)."""
    t = info.default_timeout_ms if timeout_ms is None else timeout_ms
    if not isinstance(t, (int, float)) or isinstance(t, bool) or grace is None:
        return None                             # "infinity" (or junk: the daemon says)
    return t / 1000.0 + grace


class Execution:
    """One execute in flight: its tools, the client-side tool-call budget, the
    live output callback and the tool work it started."""

    __slots__ = ("rid", "toolset", "budget", "calls", "over_budget", "stream", "live",
                 "tasks", "abort_cause", "done")

    def __init__(self, rid: int | None, toolset: ToolSet | None, budget: int | None,
                 stream: OutputHook | None, live: bool) -> None:
        self.rid = rid
        self.toolset = toolset or ToolSet.EMPTY
        self.budget = budget
        self.calls = 0
        self.over_budget = False
        self.stream = stream
        self.live = live                # the daemon streams output itself
        self.tasks: set[Any] = set()    # asyncio tasks of the async client
        self.abort_cause: errors.ToolAbort | None = None
        self.done = False

    def resolve(self, params: Any) -> tuple[Function | None, Any]:
        """(Function, args) for a tool/call, or (None, error object) for one the
        client answers at once."""
        self.calls += 1
        if self.budget is not None and self.calls > self.budget:
            self.over_budget = True
            return None, {"code": TOOL_ERROR_CODE, "message": "the execution made more than "
                          "%d tool calls (max_tool_calls)" % self.budget, "data": {"abort": True}}
        t, fn, args = params.get("tool"), params.get("function"), params.get("args")
        f = self.toolset.lookup(t, fn)
        if f is None:
            return None, {"code": TOOL_ERROR_CODE, "message": "no tool function %s.%s in this "
                          "client" % (t, fn)}
        return f, args if isinstance(args, list) else []

    def finish(self, wire: object, show: Show) -> Result:
        """The Result of the execute answer `wire`; output the daemon did not
        stream is handed to the output callback now, through show(fn, text)."""
        r = Result.from_wire(wire)
        if self.stream is not None and not self.live and r.output:
            show(self.stream, r.output)
        return r

    def failed(self, exc: errors.SandboxdError, show: Show) -> errors.SandboxdError:
        """The exception to raise for an execute that ended in exc (see
        execute_error), its output handed to the callback as in finish."""
        exc = execute_error(exc, self)
        if self.stream is not None and not self.live and exc.output:
            show(self.stream, exc.output)
        return exc


def start_execute(info: Info, code: str, toolset: ToolSet | None, bindings: Bindings | None,
                  timeout_ms: "int | Literal['infinity'] | None", limits: Limits | None,
                  stream: OutputHook | None,
                  max_tool_calls: "int | Literal['infinity'] | None", session: str | None,
                  grace: float | None) -> tuple[dict[str, Any], Execution, float | None]:
    """(params, Execution, deadline in seconds or None) for one execute on a
    connection that knows `info`."""
    params, budget = execute_params(code, toolset, bindings, timeout_ms, limits, stream,
                                    max_tool_calls, info, session)
    ex = Execution(None, toolset, budget, stream, "stream_output" in params)
    return params, ex, deadline_s(timeout_ms, info, grace)


def tool_line(tid: object, fn: Callable[..., Any], args: Sequence[Any], info: Info | None,
              ex: Execution | None) -> bytes:
    """The answer line for a tool function run now: fn(*args)'s value, or
    the error for the Exception it raised.  A BaseException (SystemExit,
    KeyboardInterrupt) propagates: the caller ends the execution with
    fatal_line and re-raises it."""
    try:
        return answer_line(tid, fn(*args), None, info, ex)
    except Exception as e:
        return answer_line(tid, exc=e, info=info, ex=ex)


def fatal_line(tid: object, exc: BaseException, info: Info | None,
               ex: Execution | None) -> bytes:
    """The answer that aborts the execution whose tool raised BaseException exc."""
    return answer_line(tid, exc=errors.ToolAbort("%s in the tool" % type(exc).__name__),
                       info=info, ex=ex)


class ConnCore:
    """What a connection does with the daemon's lines, whatever its I/O.

    A subclass reads the lines (into self.input), calls message() for each
    one in order, and provides:
      fail(err)                 the connection is lost: every waiting call raises err
      write(line)               send one line
      answered(rid, msg)        the answer msg to request rid (the id may be unknown)
      run_tool(ex, tid, f, args)  run tool function f for the call tid of ex and
                                send its answer (tool_line), now or later
      show(fn, text)            hand output text to an output callback; a failing
                                callback must not stop the reader
    """

    # what a subclass provides (see above)
    fail: Callable[[errors.SandboxdError], None]
    write: Callable[[bytes], None]
    answered: Callable[[Any, dict[str, Any]], None]
    run_tool: Callable[[Execution, Any, Function, list[Any]], None]
    show: Show

    def __init__(self, client: Any) -> None:
        self.client = client
        self.input = LineReader(BOOT_LINE_LIMIT)
        self.pending: dict[Any, Any] = {}   # request id -> what its answer resolves
        self.executions: dict[Any, Execution] = {}  # request id of an execute -> its Execution
        self.info = Info(None)              # the defaults, until described()
        self.lost: errors.SandboxdError | None = None

    def described(self, d: object) -> None:
        """Take the answer to `describe`: the limits of the daemon on this
        connection (incoming lines may now be as long as an answer can be)."""
        self.info = Info(d)
        self.input.limit = self.info.line_limit

    def message(self, line: bytes) -> None:
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
        if type(rid) in (int, str):
            self.answered(rid, msg)
            return
        err = msg.get("error")
        if rid is None and isinstance(err, dict):
            e = errors.error_from_wire(err)
            if e.kind in ("forbidden", "busy"):         # said on connect, then closed
                self.fail(e)

    def execution(self, params: object) -> Execution | None:
        """The execution in flight that a notification's params name, or None."""
        if type(params) is not dict:
            return None
        eid = params.get("execution_id")
        return self.executions.get(eid) if type(eid) in (int, str) else None

    def output(self, params: Any) -> None:
        ex = self.execution(params)
        if ex is not None and ex.stream is not None and not ex.done:
            text = params.get("text")
            if isinstance(text, str):
                self.show(ex.stream, text)

    def tool_call(self, msg: dict[str, Any]) -> None:
        tid = msg["id"]
        params = msg.get("params")
        ex = self.execution(params)
        if ex is None or ex.done:
            self.write(answer_line(tid, exc={"code": TOOL_ERROR_CODE,
                                             "message": "no execution waits for this call"}))
            return
        f, args = ex.resolve(params)
        if f is None:
            self.write(answer_line(tid, exc=args, info=self.info, ex=ex))
            return
        self.run_tool(ex, tid, f, args)


def error_object(exc: BaseException, ex: Execution | None = None) -> dict[str, Any]:
    """The tool error answer for an exception a tool raised."""
    if isinstance(exc, errors.ToolAbort):
        if ex is not None:
            ex.abort_cause = exc
        d: dict[str, Any] = {"abort": True}
        if exc.data is not None:
            try:
                d["detail"] = values.to_jsonable(exc.data)
            except values.Unencodable:
                pass
        return {"code": TOOL_ERROR_CODE, "message": str(exc.message), "data": d}
    if isinstance(exc, values.Unencodable):
        return {"code": TOOL_ERROR_CODE, "message": "cannot encode the result: %s" % exc}
    text = str(exc)
    if type(exc) is not Exception:
        text = "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
    return {"code": TOOL_ERROR_CODE, "message": text or "tool failed"}


_PLAIN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}\Z")


def _answer(tid: object, body: bytes) -> bytes:
    if type(tid) is str and _PLAIN_ID.match(tid):   # the daemon's ids: nothing to escape
        head = b'{"jsonrpc":"2.0","id":"' + tid.encode("ascii") + b'"'
    else:
        head = b'{"jsonrpc":"2.0","id":' + _dumps(tid).encode("utf-8")
    return head + body + b"}\n"


def answer_line(tid: object, value: Any = None,
                exc: BaseException | dict[str, Any] | None = None, info: Info | None = None,
                ex: Execution | None = None) -> bytes:
    """The answer to tool call `tid`: the encoded value, or the error for exc.
    A value that cannot be encoded, or whose line exceeds the daemon's
    max_message_bytes, becomes a tool error (a catchable Lua error instead of a
    line the daemon could not route, which would leave the call waiting)."""
    if exc is None:
        try:
            line = _answer(tid, b',"result":' + values.encode(value))
        except values.Unencodable as e:
            exc = e
        else:
            if info is None or len(line) - 1 <= info.max_message_bytes:
                return line
            exc = {"code": TOOL_ERROR_CODE, "message": "tool result of %d bytes exceeds the "
                   "daemon's message limit of %d bytes" % (len(line) - 1, info.max_message_bytes)}
    err = exc if isinstance(exc, dict) else error_object(exc, ex)
    line = _answer(tid, b',"error":' + _dumps(err).encode("utf-8"))
    if info is not None and len(line) - 1 > info.max_message_bytes:
        err = {"code": TOOL_ERROR_CODE, "message": err["message"][:200] + "..."}
        line = _answer(tid, b',"error":' + _dumps(err).encode("utf-8"))
    return line


def execute_error(exc: errors.SandboxdError, ex: Execution | None) -> errors.SandboxdError:
    """Adjust the exception ending an execute: a client-enforced tool budget
    reads as tool_call_limit, and a ToolAbort raised here is the cause."""
    if ex is not None and ex.over_budget and ex.budget is not None and exc.kind == "tool_aborted":
        exc = errors.LimitExceeded("the execution made more than %d tool calls "
                                   "(max_tool_calls)" % ex.budget, kind="tool_call_limit",
                                   code=-32014, data=dict(exc.data, kind="tool_call_limit",
                                                          client=True))
    elif ex is not None and ex.abort_cause is not None and exc.kind == "tool_aborted":
        exc.__cause__ = ex.abort_cause
    return exc


def deadline_error(secs: float, grace: float | None) -> errors.SandboxdError:
    return errors.make_error(
        "timeout", "no answer within %.1f s (the client's deadline: timeout_ms plus %.1f s, "
        "time in the daemon's queue included)" % (secs, grace or 0.0))


def conn_lost_error(reason: object) -> errors.DaemonUnavailable:
    return errors.DaemonUnavailable("the connection to sandboxd was lost: %s" % reason)


class ClientCore:
    """The settings and the request parameters both clients share; the
    connection itself (self._conn) is opened by each client its own way."""

    def __init__(self, socket: "str | os.PathLike[str] | None", connect_timeout: float,
                 tool_threads: int, deadline_grace: float | None) -> None:
        self.deadline_grace = deadline_grace
        self.socket_path = socket_path(socket)
        self.connect_timeout = connect_timeout
        self.tool_threads = tool_threads
        self._conn: Any = None
        self._threads: Any = None
        self._prompt_info: dict[bool, Any] = {}

    def _drop_connection(self) -> None:
        c, self._conn = self._conn, None
        if c is not None:
            c.fail(errors.DaemonUnavailable("the client was closed"))

    def _connect_error(self, exc: BaseException) -> errors.DaemonUnavailable:
        return errors.DaemonUnavailable("cannot connect to sandboxd at %s: %s"
                                        % (self.socket_path, exc))

    @staticmethod
    def _check_params(code: str, tools: Tools | None) -> dict[str, Any]:
        params: dict[str, Any] = {"code": code}
        ts = ToolSet(tools)
        if ts:
            params["tools"] = ts.wire
        return params

    @staticmethod
    def _prompt_params(session: bool) -> dict[str, Any] | None:
        return {"session": True} if session else None



class SessionCore:
    """A conversation's sandbox state: the rules both clients' sessions
    follow (sync.Session, aio.AsyncSession), their I/O left to them.

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

    def __init__(self, client: Any, tools: Tools | None, bindings: Bindings | None,
                 timeout_ms: "int | Literal['infinity'] | None", limits: Limits | None,
                 daemon: bool | None) -> None:
        self.client = client
        self.toolset = ToolSet(tools)
        self.initial_bindings: list[Any] = list(bindings or [])
        self.bindings: list[Any] = list(self.initial_bindings)
        self.timeout_ms = timeout_ms
        self.limits: dict[str, Any] = dict(limits or {})
        self.want_daemon = daemon
        self.id: str | None = None
        self.restarts = -1
        self.closed = False
        self.stateful: bool | None = None       # decided on open
        self._conn: Any = None

    def _check_open(self) -> None:
        if self.closed:
            raise errors.make_error("session_not_found", "this session was closed")

    def _open_params(self, conn: ConnCore) -> dict[str, Any] | None:
        """The params of the session/open to send on conn, or None when no
        session needs opening there (stateless, or already open on conn)."""
        if self.stateful is None:
            has = "sessions" in conn.info.features
            if self.want_daemon and not has:
                raise errors.make_error("method_not_found", "this daemon has no sessions "
                                        "(describe does not list the feature)")
            self.stateful = has if self.want_daemon is None else bool(self.want_daemon)
        if not self.stateful or (self.id is not None and self._conn is conn):
            return None
        p: dict[str, Any] = {}
        if self.toolset:
            p["tools"] = self.toolset.wire
        if self.initial_bindings:
            p["bindings"] = self.initial_bindings
        if self.timeout_ms is not None:
            p["timeout_ms"] = self.timeout_ms
        if self.limits:
            p["limits"] = self.limits
        return p

    def _opened(self, conn: ConnCore, r: object) -> None:
        if not isinstance(r, dict) or not isinstance(r.get("session"), str):
            raise errors.ProtocolError("session/open answered %r" % (r,))
        self.id, self._conn = r["session"], conn
        self.restarts += 1

    def _execute_args(self, conn: Any, code: str, timeout_ms: "int | Literal['infinity'] | None",
                      limits: Limits | None, stream_output: OutputHook | None,
                      max_tool_calls: "int | Literal['infinity'] | None") -> tuple[Any, ...]:
        """The arguments of the client's _execute for one execute in this session."""
        if timeout_ms is None:
            timeout_ms = self.timeout_ms
        if not self.stateful:
            return (conn, code, self.toolset, self.bindings, timeout_ms,
                    dict(self.limits, **(limits or {})), stream_output, max_tool_calls, None)
        return (conn, code, self.toolset, None, timeout_ms, limits, stream_output,
                max_tool_calls, self.id)

    def _executed(self, r: Result) -> Result:
        if not self.stateful:
            self.bindings = r.bindings if r.bindings is not None else []
        return r

    def _failed(self, e: errors.SandboxdError) -> None:
        """An execute raised e: a daemon session it ended is opened anew next time."""
        if self.stateful and (e.session_closed or e.kind == "session_not_found"
                              or isinstance(e, errors.DaemonUnavailable)):
            self.id = None

    def _local_snapshot(self) -> dict[str, Any]:
        return {"bindings": self.bindings, "binding_names": [p[0] for p in self.bindings]}

    def _closing(self) -> tuple[str | None, Any]:
        """(session id, connection) to send session/close on, or (None, None);
        the session counts as closed from here on."""
        if self.closed:
            return None, None
        self.closed = True
        sid, conn, self.id = self.id, self._conn, None
        if sid is not None and conn is not None and conn.lost is None:
            return sid, conn
        return None, None
