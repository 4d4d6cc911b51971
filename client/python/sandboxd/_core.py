"""sandboxd._core - what the blocking and the asyncio client share: the
default socket, the connection's knowledge from `describe`, building requests,
the state of one execution, turning a tool's outcome into the answer line
(with the outgoing size guard), and turning an answer into a Result or an
exception.  No I/O happens here.
"""

import json
import os
import re

from . import errors, values
from .tools import ToolSet

DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock"
# Incoming lines are refused above this before `describe` has told the real
# limits (a describe answer is a few hundred bytes).
BOOT_LINE_LIMIT = 1 << 20
# Client-side deadline: timeout_ms plus this much (the default), so the
# daemon's own timeout answer (with output and stats) normally arrives first.
DEADLINE_GRACE_S = 2.0
TOOL_ERROR_CODE = 1

_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False,
                          separators=(",", ":")).encode


def socket_path(socket=None):
    """The socket to use: the argument, else $SANDBOXD_SOCKET, else the default."""
    return os.fspath(socket) if socket else (os.environ.get("SANDBOXD_SOCKET") or DEFAULT_SOCKET)


class LineReader:
    """The incoming byte stream cut into lines, read into one reused buffer
    (recv_into: no allocation per read; a 1 MiB recv() costs page faults on
    every call).  space() is where the next read goes; feed(n) takes n new
    bytes and returns the whole lines that completed.  A partial line longer
    than `limit` raises ProtocolError."""

    CHUNK = 1 << 16

    def __init__(self, limit):
        self.buf = bytearray(self.CHUNK * 4)
        self.len = 0
        self.limit = limit

    def space(self):
        buf = self.buf
        if len(buf) - self.len < self.CHUNK:
            if self.len > self.limit:
                raise errors.ProtocolError("the daemon sent a line longer than %d bytes"
                                           % self.limit)
            self.buf = buf = buf + bytes(len(buf))          # a new object: no live export
        elif self.len < self.CHUNK and len(buf) > (8 << 20):
            self.buf = buf = buf[:self.len] + bytes(self.CHUNK * 4)   # after a huge line
        return memoryview(buf)[self.len:]

    def feed(self, n):
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

    def __init__(self, value=None, bindings=None, binding_names=(), output="",
                 output_truncated=False, stats=None):
        self.value = value
        self.bindings = bindings
        self.binding_names = list(binding_names)
        self.output = output
        self.output_truncated = output_truncated
        self.stats = stats or {}

    @classmethod
    def from_wire(cls, r):
        if not isinstance(r, dict):
            raise errors.ProtocolError("execute answered a non-object result: %r" % (r,))
        names = r.get("binding_names")
        if not isinstance(names, list):
            b = r.get("bindings")
            names = [p[0] for p in b if isinstance(p, list) and p] if isinstance(b, list) else []
        return cls(r.get("value"), r.get("bindings"), names, r.get("output") or "",
                   bool(r.get("output_truncated")), r.get("stats"))

    def __repr__(self):
        return "Result(value=%r, binding_names=%r, output=%r)" % (
            self.value, self.binding_names, self.output)


class Info:
    """What a connection learnt from `describe`."""

    def __init__(self, d):
        d = d if isinstance(d, dict) else {}
        self.describe = d
        daemon = d.get("daemon") if isinstance(d.get("daemon"), dict) else {}
        maxima = d.get("maximums") if isinstance(d.get("maximums"), dict) else {}
        defaults = d.get("defaults") if isinstance(d.get("defaults"), dict) else {}
        self.max_message_bytes = _num(daemon.get("max_message_bytes"), 16 << 20)
        self.max_code_bytes = _num(daemon.get("max_code_bytes"), 65536)
        self.default_timeout_ms = defaults.get("timeout_ms", 60000)
        self.features = frozenset(f for f in d.get("features", ()) if isinstance(f, str))
        # An answer holds at most a value (max_message_bytes), the output and
        # the bindings (each up to its ceiling), and the envelope.
        self.line_limit = (self.max_message_bytes + _num(maxima.get("max_output_bytes"), 16 << 20)
                           * 2 + _num(maxima.get("max_bindings_bytes"), 16 << 20) * 2 + (1 << 20))


def _num(v, dflt):
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else dflt


def request_line(rid, method, params, info):
    """The request as a line (bytes).  A line the daemon would refuse for its
    length (and then could not route its answer) raises InvalidRequest here."""
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
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


def notification_line(method, params):
    return _dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode("utf-8") + b"\n"


def cancel_line(rid):
    return notification_line("$/cancelRequest", {"id": rid})


def execute_params(code, toolset, bindings, timeout_ms, limits, stream, max_tool_calls,
                   info, session=None):
    """(params, client_budget): client_budget is the tool-call budget the
    client enforces itself when the daemon has no max_tool_calls limit."""
    if not isinstance(code, str):
        raise TypeError("code must be a str, got %s" % type(code).__name__)
    p = {"code": code}
    if session is not None:
        p["session"] = session
    else:
        if toolset:
            p["tools"] = toolset.wire
        if bindings:
            p["bindings"] = bindings
    if timeout_ms is not None:
        p["timeout_ms"] = timeout_ms
    lim = dict(limits) if limits else {}
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


def deadline_s(timeout_ms, info, grace):
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

    def __init__(self, rid, toolset, budget, stream, live):
        self.rid = rid
        self.toolset = toolset or ToolSet.EMPTY
        self.budget = budget
        self.calls = 0
        self.over_budget = False
        self.stream = stream
        self.live = live                # the daemon streams output itself
        self.tasks = set()
        self.abort_cause = None
        self.done = False

    def resolve(self, params):
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


def error_object(exc, ex=None):
    """The tool error answer for an exception a tool raised."""
    if isinstance(exc, errors.ToolAbort):
        if ex is not None:
            ex.abort_cause = exc
        d = {"abort": True}
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


def _answer(tid, body):
    if type(tid) is str and _PLAIN_ID.match(tid):   # the daemon's ids: nothing to escape
        head = b'{"jsonrpc":"2.0","id":"' + tid.encode("ascii") + b'"'
    else:
        head = b'{"jsonrpc":"2.0","id":' + _dumps(tid).encode("utf-8")
    return head + body + b"}\n"


def answer_line(tid, value=None, exc=None, info=None, ex=None):
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


def execute_error(exc, ex):
    """Adjust the exception ending an execute: a client-enforced tool budget
    reads as tool_call_limit, and a ToolAbort raised here is the cause."""
    if ex is not None and ex.over_budget and exc.kind == "tool_aborted":
        exc = errors.LimitExceeded("the execution made more than %d tool calls "
                                   "(max_tool_calls)" % ex.budget, kind="tool_call_limit",
                                   code=-32014, data=dict(exc.data, kind="tool_call_limit",
                                                          client=True))
    elif ex is not None and ex.abort_cause is not None and exc.kind == "tool_aborted":
        exc.__cause__ = ex.abort_cause
    return exc


def deadline_error(secs, grace):
    return errors.make_error(
        "timeout", "no answer within %.1f s (the client's deadline: timeout_ms plus %.1f s, "
        "time in the daemon's queue included)" % (secs, grace))


def conn_lost_error(reason):
    return errors.DaemonUnavailable("the connection to sandboxd was lost: %s" % reason)
