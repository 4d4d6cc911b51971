"""sbx.py - a small, strict sandboxd client for the integration tests.

Stdlib only.  One Client is one Unix-socket connection speaking JSON-RPC 2.0
over NDJSON (docs/protocol.md §1-2).  It never blocks without a deadline: every
read has a timeout, so a hung daemon fails a test instead of hanging the suite.

Incoming messages are handled as they arrive:
  * responses are stored by id (and in arrival order) until a test collects them;
  * "tool/call" requests are dispatched to the handlers registered for their
    execution_id (or the client's default handlers) and answered at once,
    unless the handler returns NO_REPLY (then the call is kept in .deferred
    and the test answers it later with Client.reply()).

Every message is validated on arrival: it must be UTF-8 JSON with
"jsonrpc": "2.0", without NaN/Infinity, and every error object must be
{code, message, data} with a known data.kind whose code matches the table of
docs/protocol.md §7.  A violation raises ProtocolViolation (a test failure).
"""

import itertools
import json
import os
import re
import select
import socket
import time

SCALE = 3 if os.environ.get("SANDBOXD_SANITIZE") == "1" else 1
DEFAULT_TIMEOUT = 15.0 * SCALE
# The bound of a wait that ends as soon as its condition holds: a safety
# net against a hang, never the test's claim, so a loaded machine (CI's
# CPU hogs, another suite beside this one) cannot fail it by being slow.
SAFETY_NET = 60.0 * SCALE

# docs/protocol.md §7
KIND_CODES = {
    "parse_error": -32700,
    "invalid_request": -32600,
    "message_too_large": -32600,
    "method_not_found": -32601,
    "invalid_params": -32602,
    "limit_out_of_range": -32602,
    "internal_error": -32603,
    "syntax_error": -32001,
    "runtime_error": -32002,
    "timeout": -32003,
    "memory_limit": -32004,
    "reductions_limit": -32005,
    "cpu_limit": -32006,
    "crashed": -32007,
    "code_too_large": -32008,
    "busy": -32009,
    "forbidden": -32010,
    "tool_aborted": -32011,
    "bindings_too_large": -32012,
    "session_not_found": -32013,
    "tool_call_limit": -32014,
    "cancelled": -32800,
}

NO_REPLY = object()   # handler return value: do not answer this tool call now

# The syscall audit's corpus (tests/audit): with SANDBOXD_RECORD_CHUNKS=PATH,
# every request that runs or compiles Lua (RECORDED) that a Client sends is
# appended to PATH as one JSON line {"c": connection, "id", "m": method,
# "p": params}, and its answer as {"c", "id", "m": "=answer", "kind": the
# error's kind or null, "s": the session a session/open opened}.  The
# Makefile sets it for the integration suite; make test-audit replays it.
RECORD_PATH = os.environ.get("SANDBOXD_RECORD_CHUNKS")
RECORDED = ("execute", "check", "session/open", "session/snapshot", "session/close")
_record_fd = None
_connections = itertools.count(1)


def _record(entry):
    global _record_fd
    if _record_fd is None:
        _record_fd = os.open(RECORD_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_record_fd, (json.dumps(entry, separators=(",", ":")) + "\n").encode("utf-8"))


class ProtocolViolation(AssertionError):
    """The daemon sent something the contract does not allow."""


class ConnectionClosed(AssertionError):
    """The daemon closed the connection while we were waiting for something."""


class ReadTimeout(AssertionError):
    """Nothing (or not the expected thing) arrived before the deadline."""


class ToolError(Exception):
    """Raise from a tool handler to answer the tool call with an error."""

    def __init__(self, message, abort=False, code=-32000, data=None):
        super().__init__(message)
        self.message = message
        self.abort = abort
        self.code = code
        self.data = data


def _reject_constant(name):
    raise ValueError("non-JSON constant %s" % name)


def _check_strings(v, path="$"):
    """Every string must be encodable as UTF-8 (no lone surrogates via \\u escapes)."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ProtocolViolation("string at %s is not valid Unicode: %r (%s)" % (path, v, e))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _check_strings(x, "%s[%d]" % (path, i))
    elif isinstance(v, dict):
        for k, x in v.items():
            _check_strings(k, path + ".<key>")
            _check_strings(x, "%s.%s" % (path, k))


def parse_line(line):
    """Parse one NDJSON line (bytes, without '\\n') strictly."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolViolation("daemon sent invalid UTF-8: %r (%s)" % (line[:200], e))
    try:
        msg = json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise ProtocolViolation("daemon sent invalid JSON: %r (%s)" % (text[:300], e))
    _check_strings(msg)
    return msg, text


def validate_error(err, where=""):
    if not isinstance(err, dict):
        raise ProtocolViolation("%serror is not an object: %r" % (where, err))
    for k in ("code", "message", "data"):
        if k not in err:
            raise ProtocolViolation("%serror lacks %r: %r" % (where, k, err))
    if not isinstance(err["code"], int) or isinstance(err["code"], bool):
        raise ProtocolViolation("%serror code is not an integer: %r" % (where, err))
    if not isinstance(err["message"], str):
        raise ProtocolViolation("%serror message is not a string: %r" % (where, err))
    data = err["data"]
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ProtocolViolation("%serror data.kind missing: %r" % (where, err))
    kind = data["kind"]
    if kind not in KIND_CODES:
        raise ProtocolViolation("%sunknown error kind %r: %r" % (where, kind, err))
    if KIND_CODES[kind] != err["code"]:
        raise ProtocolViolation("%skind %s must have code %d, got %r" %
                                (where, kind, KIND_CODES[kind], err["code"]))


def strip_lua_position(msg):
    """Drop a leading Lua position ('[string "..."]:1: ' or 'name:1: ')."""
    if not isinstance(msg, str):
        return msg
    return re.sub(r'^(\[string "[^"]*"\]|[^\s:]+):\d+: ', "", msg, count=1)


class Response:
    """One response from the daemon."""

    def __init__(self, msg, raw):
        self.msg = msg
        self.raw = raw
        self.id = msg.get("id")
        self.result = msg.get("result")
        self.error = msg.get("error")

    @property
    def ok(self):
        return "result" in self.msg

    @property
    def code(self):
        return self.error["code"] if self.error else None

    @property
    def kind(self):
        return self.error["data"]["kind"] if self.error else None

    @property
    def data(self):
        return self.error["data"] if self.error else None

    @property
    def message(self):
        return self.error["message"] if self.error else None

    def __repr__(self):
        return "Response(%s)" % self.raw[:2000]


class ToolCall:
    """One incoming tool/call request."""

    def __init__(self, msg, raw):
        self.msg = msg
        self.raw = raw
        self.id = msg["id"]
        p = msg["params"]
        self.params = p
        self.execution_id = p.get("execution_id")
        self.tool = p.get("tool")
        self.module = p.get("module")
        self.function = p.get("function")
        self.args = p.get("args")
        self.answered = False

    @property
    def name(self):
        return "%s.%s" % (self.tool, self.function)

    def __repr__(self):
        return "ToolCall(%s)" % self.raw[:500]


class Client:
    def __init__(self, path, timeout=None, connect_timeout=None):
        self.path = path
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(connect_timeout or self.timeout)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.buf = b""
        self._ids = itertools.count(1)
        self.arrivals = []          # Responses not yet collected, arrival order
        self.handlers = {}          # execution id -> handlers
        self.default_handlers = None
        self.tool_calls = []        # every ToolCall received, in order
        self.deferred = []          # ToolCalls whose handler returned NO_REPLY
        self.unhandled = []         # ToolCalls no handler existed for
        self.others = []            # other incoming requests / notifications
        self.log = []               # (kind, message) of everything received, in order:
                                    # kind is "response", "tool_call" or "other"
        self.eof = False
        self.record_as = "%d-%d" % (os.getpid(), next(_connections)) if RECORD_PATH else None
        self.recorded = set()       # ids of recorded requests not answered yet

    # ---------------------------------------------------------------- sending
    def _record_sent(self, data):
        """Record the requests in data that run Lua (see RECORD_PATH)."""
        for line in data.split(b"\n"):
            try:
                msg = json.loads(line)
            except ValueError:
                continue            # a partial or deliberately broken line
            for m in msg if isinstance(msg, list) else [msg]:
                if isinstance(m, dict) and m.get("method") in RECORDED and "id" in m:
                    _record({"c": self.record_as, "id": m["id"], "m": m["method"],
                             "p": m.get("params")})
                    if isinstance(m["id"], (str, int)):     # an id the daemon may echo
                        self.recorded.add(_key(m["id"]))

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.record_as is not None:
            self._record_sent(data)
        deadline = time.monotonic() + self.timeout
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except BlockingIOError:
                # The daemon is not reading; keep draining our side so that
                # neither end deadlocks on full buffers.
                if time.monotonic() > deadline:
                    raise ReadTimeout("send blocked for %.1fs" % self.timeout)
                r, w, _ = select.select([self.sock], [self.sock], [], 0.05)
                if r:
                    self._fill(0)
                    self._drain_buffer()

    def send_msg(self, obj):
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
        self.send_raw(line.encode("utf-8"))

    def next_id(self):
        return next(self._ids)

    def request(self, method, params=None, id=None, handlers=None):
        """Send a request; return its id (does not wait)."""
        if id is None:
            id = self.next_id()
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        if handlers is not None:
            self.handlers[_key(id)] = handlers
        self.send_msg(msg)
        return id

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_msg(msg)

    def cancel(self, id):
        self.notify("$/cancelRequest", {"id": id})

    def reply(self, call, result=None, error=None):
        """Answer a tool call (ToolCall or its id) with a result or an error.

        error may be a ToolError or a ready error object."""
        cid = call.id if isinstance(call, ToolCall) else call
        if error is not None:
            if isinstance(error, ToolError):
                error = _tool_error_obj(error)
            msg = {"jsonrpc": "2.0", "id": cid, "error": error}
        else:
            msg = {"jsonrpc": "2.0", "id": cid, "result": result}
        if isinstance(call, ToolCall):
            call.answered = True
        self.send_msg(msg)

    def send_execute(self, code, tools=None, bindings=None, timeout_ms=None, limits=None,
                     handlers=None, id=None, **extra):
        params = {"code": code}
        if tools is not None:
            params["tools"] = tools
        if bindings is not None:
            params["bindings"] = bindings
        if timeout_ms is not None:
            params["timeout_ms"] = timeout_ms
        if limits is not None:
            params["limits"] = limits
        params.update(extra)
        return self.request("execute", params, id=id, handlers=handlers)

    # ---------------------------------------------------------------- receiving
    def _fill(self, timeout):
        """Read what is available (waiting up to timeout). Returns False on EOF."""
        if self.eof:
            return False
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not r:
            return True
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return True
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _drain_buffer(self):
        """Handle every complete line in the buffer."""
        handled = 0
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not line.strip():
                raise ProtocolViolation("daemon sent a blank line")
            self._handle(line)
            handled += 1
        return handled

    def _handle(self, line):
        msg, text = parse_line(line)
        if not isinstance(msg, dict):
            raise ProtocolViolation("daemon sent a non-object: %r" % text[:300])
        if msg.get("jsonrpc") != "2.0":
            raise ProtocolViolation("message without jsonrpc 2.0: %r" % text[:300])
        if "method" in msg:
            if msg["method"] == "tool/call" and "id" in msg:
                self.log.append(("tool_call", msg))
                self._tool_call(msg, text)
            else:
                self.log.append(("other", msg))
                self.others.append(msg)
            return
        if "id" not in msg:
            raise ProtocolViolation("response without id: %r" % text[:300])
        if ("result" in msg) == ("error" in msg):
            raise ProtocolViolation("response needs exactly one of result/error: %r" % text[:300])
        if "error" in msg:
            validate_error(msg["error"], "response %r: " % (msg.get("id"),))
        self.log.append(("response", msg))
        if self.record_as is not None and isinstance(msg["id"], (str, int)) and \
                _key(msg["id"]) in self.recorded:
            self.recorded.discard(_key(msg["id"]))
            result = msg.get("result") if isinstance(msg.get("result"), dict) else {}
            _record({"c": self.record_as, "id": msg["id"], "m": "=answer",
                     "kind": msg["error"]["data"]["kind"] if "error" in msg else None,
                     "s": result.get("session")})
        self.arrivals.append(Response(msg, text))

    def _tool_call(self, msg, text):
        if not isinstance(msg["id"], str):
            raise ProtocolViolation("tool/call id must be a string chosen by the daemon: %r" % text)
        p = msg.get("params")
        if not isinstance(p, dict):
            raise ProtocolViolation("tool/call without params object: %r" % text)
        for k in ("execution_id", "tool", "module", "function", "args"):
            if k not in p:
                raise ProtocolViolation("tool/call params lack %r: %r" % (k, text))
        if not isinstance(p["args"], list):
            raise ProtocolViolation("tool/call args is not an array: %r" % text)
        call = ToolCall(msg, text)
        self.tool_calls.append(call)
        handlers = self.handlers.get(_key(call.execution_id), self.default_handlers)
        fn = None
        if callable(handlers):
            fn = lambda args, _h=handlers, _c=call: _h(_c)  # noqa: E731
        elif isinstance(handlers, dict):
            fn = handlers.get(call.name)
        if fn is None:
            self.unhandled.append(call)
            self.reply(call, error={"code": -32000, "message": "no handler for %s in test" % call.name,
                                    "data": {}})
            return
        try:
            value = fn(call.args) if callable(fn) else fn
        except ToolError as e:
            self.reply(call, error=e)
            return
        if value is NO_REPLY:
            self.deferred.append(call)
            return
        self.reply(call, result=value)

    def pump(self, timeout):
        """Wait up to timeout for data and handle every complete message.
        Returns the number of messages handled; raises ConnectionClosed on EOF
        with nothing buffered."""
        n = self._drain_buffer()
        if n:
            return n
        alive = self._fill(timeout)
        n = self._drain_buffer()
        if not alive and not n:
            raise ConnectionClosed("daemon closed the connection")
        return n

    def _wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            got = pred()
            if got is not None:
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReadTimeout("timed out waiting for %s; pending arrivals: %r" %
                                  (what, self.arrivals[:5]))
            try:
                self.pump(min(left, 0.5))
            except ConnectionClosed:
                got = pred()
                if got is not None:
                    return got
                raise ConnectionClosed("daemon closed the connection while waiting for %s" % what)

    def wait(self, id, timeout=None):
        """The response to request id (waiting, and serving tool calls meanwhile)."""
        def pred():
            for i, r in enumerate(self.arrivals):
                if r.id == id and type(r.id) is type(id):
                    self.arrivals.pop(i)
                    self.handlers.pop(_key(id), None)
                    return r
            return None
        return self._wait_for(pred, timeout, "response to id %r" % (id,))

    def wait_all(self, ids, timeout=None):
        return {i: self.wait(i, timeout) for i in ids}

    def next_response(self, timeout=None):
        """The earliest response not yet collected, whatever its id."""
        def pred():
            return self.arrivals.pop(0) if self.arrivals else None
        return self._wait_for(pred, timeout, "any response")

    def wait_tool_call(self, count=1, timeout=None):
        """Wait until at least count tool calls have arrived in total; return the last."""
        def pred():
            return self.tool_calls[count - 1] if len(self.tool_calls) >= count else None
        return self._wait_for(pred, timeout, "tool call #%d" % count)

    def wait_deferred(self, count=1, timeout=None):
        def pred():
            return self.deferred[count - 1] if len(self.deferred) >= count else None
        return self._wait_for(pred, timeout, "deferred tool call #%d" % count)

    def output_notes(self, execution_id):
        """The texts of the execution/output notifications for execution_id, in order.
        Each must carry exactly execution_id and a string text."""
        texts = []
        for m in self.others:
            if m.get("method") != "execution/output":
                continue
            if "id" in m:
                raise ProtocolViolation("execution/output must be a notification: %r" % m)
            p = m.get("params")
            if not isinstance(p, dict) or set(p) != {"execution_id", "text"} or \
                    not isinstance(p["text"], str):
                raise ProtocolViolation("bad execution/output params: %r" % m)
            if p["execution_id"] == execution_id and \
                    type(p["execution_id"]) is type(execution_id):
                texts.append(p["text"])
        return texts

    def wait_eof(self, timeout=None):
        """Wait until the daemon closes the connection; returns True if it did."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            try:
                self.pump(min(0.2, max(0.0, deadline - time.monotonic())))
            except ConnectionClosed:
                return True
        return False

    def assert_quiet_until_ping(self, timeout=None):
        """Send ping and assert the very next message is its response, i.e. nothing
        else (no error for an earlier notification or blank line) came first."""
        pid = self.request("ping", {})
        r = self.next_response(timeout)
        assert r.id == pid and r.ok and r.result == {}, \
            "expected only the ping response, got %r" % (r,)
        return r

    # ---------------------------------------------------------------- helpers
    def call(self, method, params=None, handlers=None, timeout=None, id=None):
        return self.wait(self.request(method, params, id=id, handlers=handlers), timeout)

    def execute(self, code, tools=None, bindings=None, timeout_ms=None, limits=None,
                handlers=None, timeout=None, **extra):
        i = self.send_execute(code, tools=tools, bindings=bindings, timeout_ms=timeout_ms,
                              limits=limits, handlers=handlers, **extra)
        return self.wait(i, timeout)

    def exec_ok(self, code, **kw):
        r = self.execute(code, **kw)
        assert r.ok, "execute %r failed: %r" % (code[:200], r)
        return r.result

    def value(self, code, **kw):
        return self.exec_ok(code, **kw)["value"]

    def exec_err(self, code, code_=None, kind=None, **kw):
        r = self.execute(code, **kw)
        assert not r.ok, "execute %r should fail (%s) but gave %r" % (code[:200], kind, r)
        if kind is not None:
            assert r.kind == kind, "expected kind %s, got %r" % (kind, r)
        if code_ is not None:
            assert r.code == code_, "expected code %d, got %r" % (code_, r)
        return r

    def ping(self, timeout=None):
        r = self.call("ping", {}, timeout=timeout)
        assert r.ok and r.result == {}, "ping: %r" % (r,)
        return r

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def _key(id):
    return (type(id).__name__, id)


def _tool_error_obj(e):
    data = dict(e.data or {})
    if e.abort:
        data["abort"] = True
    return {"code": e.code, "message": e.message, "data": data}
