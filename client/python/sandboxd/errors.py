"""sandboxd.errors - the exceptions of the client, one class per family of
error kinds (client/python/README.md).

Every error the daemon answers becomes a SandboxdError subclass chosen by
`data.kind` (never by the message, which is for people).  The attributes
mirror the wire object: .kind, .code, .message, .data, and the fields of
`data` an agent shows its model: .output, .output_truncated, .stats,
.line, .traceback.  Errors the client decides itself (cannot connect, the
connection was lost, a client-side deadline, a request too large to send)
use the same classes and kinds, with `data.client` set to true.
"""

from typing import Any, cast

from ._types import Stats

__all__ = [
    "SandboxdError", "LuaError", "LimitExceeded", "Cancelled", "ToolAborted", "Busy",
    "Forbidden", "SessionNotFound", "InvalidRequest", "DaemonUnavailable", "ProtocolError",
    "ToolAbort", "error_from_wire",
]


class SandboxdError(Exception):
    """An error answered by the daemon (or decided by the client).

    kind     data.kind, e.g. "runtime_error"
    code     the JSON-RPC error code, e.g. -32002
    message  the error message
    data     the whole data object of the error (a dict, never None)
    """

    def __init__(self, message: str, *, kind: str = "internal_error", code: int = -32603,
                 data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.code = code
        self.data: dict[str, Any] = dict(data) if isinstance(data, dict) else {}
        self.data.setdefault("kind", kind)

    @property
    def output(self) -> str:
        """What the chunk printed before the end ("" when none or not known)."""
        out = self.data.get("output")
        return out if isinstance(out, str) else ""

    @property
    def output_truncated(self) -> bool:
        return bool(self.data.get("output_truncated", False))

    @property
    def stats(self) -> Stats | None:
        """The execution's stats (wall_us, cpu_us, tool_calls, ...) or None when it
        never reached a worker."""
        st = self.data.get("stats")
        return cast(Stats, st) if isinstance(st, dict) else None

    @property
    def line(self) -> int | None:
        v = self.data.get("line")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    @property
    def traceback(self) -> str | None:
        v = self.data.get("traceback")
        return v if isinstance(v, str) else None

    @property
    def session_closed(self) -> bool:
        """True when this error ended the daemon session the chunk ran in."""
        return bool(self.data.get("session_closed", False))

    def __repr__(self) -> str:
        return "%s(kind=%r, code=%r, message=%r)" % (type(self).__name__, self.kind, self.code,
                                                     self.message)


class LuaError(SandboxdError):
    """syntax_error or runtime_error: the chunk is at fault; .line and
    .traceback where the daemon knows them."""


class LimitExceeded(SandboxdError):
    """timeout, memory_limit, reductions_limit, cpu_limit, bindings_too_large,
    tool_call_limit.  A timeout decided by the client (its deadline, which also
    counts time in the daemon's queue) has data["client"] = True."""


class Cancelled(SandboxdError):
    """cancelled: by $/cancelRequest from elsewhere, or the daemon shutting down.
    (Cancelling the awaiting task raises asyncio.CancelledError, not this.)"""


class ToolAborted(SandboxdError):
    """tool_aborted: a tool raised ToolAbort.  .tool_error is the error object
    the client sent; __cause__ is the ToolAbort raised by the tool when it ran
    in this client."""

    @property
    def tool_error(self) -> dict[str, Any] | None:
        v = self.data.get("tool_error")
        return v if isinstance(v, dict) else None


class Busy(SandboxdError):
    """busy: every worker is taken and the queue is full (or too many
    connections, or too many sessions).  Retryable."""


class Forbidden(SandboxdError):
    """forbidden: this process's uid and gid may not use the daemon."""


class SessionNotFound(SandboxdError):
    """session_not_found: no open session of this connection has that id."""


class InvalidRequest(SandboxdError):
    """invalid_params, limit_out_of_range, code_too_large, message_too_large,
    invalid_request, method_not_found, parse_error: the request is at fault."""


class DaemonUnavailable(SandboxdError):
    """The daemon cannot be reached, or the connection was lost while waiting
    for an answer.  The next call connects again."""

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        d: dict[str, Any] = {"client": True}
        d.update(data or {})
        super().__init__(message, kind="unavailable", code=-32099, data=d)


class ProtocolError(DaemonUnavailable):
    """The daemon sent something that is not a JSON-RPC message of the protocol
    (the connection is closed; the next call connects again)."""


class ToolAbort(Exception):
    """Raise this from a tool to end the whole execution (kind tool_aborted)
    instead of raising a catchable Lua error.  `data` (JSON-able) travels in
    the error object next to `abort: true`."""

    def __init__(self, message: str = "aborted by a tool", data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


_BY_KIND: dict[str, type[SandboxdError]] = {
    "syntax_error": LuaError, "runtime_error": LuaError,
    "timeout": LimitExceeded, "memory_limit": LimitExceeded,
    "reductions_limit": LimitExceeded, "cpu_limit": LimitExceeded,
    "bindings_too_large": LimitExceeded, "tool_call_limit": LimitExceeded,
    "cancelled": Cancelled,
    "tool_aborted": ToolAborted,
    "busy": Busy,
    "forbidden": Forbidden,
    "session_not_found": SessionNotFound,
    "invalid_params": InvalidRequest, "limit_out_of_range": InvalidRequest,
    "code_too_large": InvalidRequest, "message_too_large": InvalidRequest,
    "invalid_request": InvalidRequest, "method_not_found": InvalidRequest,
    "parse_error": InvalidRequest,
}

# Codes of the kinds, for errors the client decides itself.
CODES: dict[str, int] = {
    "parse_error": -32700, "invalid_request": -32600, "message_too_large": -32600,
    "method_not_found": -32601, "invalid_params": -32602, "limit_out_of_range": -32602,
    "internal_error": -32603, "syntax_error": -32001, "runtime_error": -32002,
    "timeout": -32003, "memory_limit": -32004, "reductions_limit": -32005,
    "cpu_limit": -32006, "crashed": -32007, "code_too_large": -32008, "busy": -32009,
    "forbidden": -32010, "tool_aborted": -32011, "bindings_too_large": -32012,
    "session_not_found": -32013, "tool_call_limit": -32014, "cancelled": -32800,
}


def class_for(kind: str) -> type[SandboxdError]:
    return _BY_KIND.get(kind, SandboxdError)


def make_error(kind: str, message: str, data: dict[str, Any] | None = None) -> SandboxdError:
    """A client-decided error of `kind` (data.client is true)."""
    d: dict[str, Any] = {"client": True}
    d.update(data or {})
    return class_for(kind)(message, kind=kind, code=CODES.get(kind, -32603), data=d)


def copy_error(e: SandboxdError) -> SandboxdError:
    """A fresh exception like e (one instance per waiting caller, so tracebacks
    do not pile up on a shared object)."""
    c: SandboxdError
    if isinstance(e, DaemonUnavailable):
        c = type(e)(e.message, data=e.data)
    else:
        c = type(e)(e.message, kind=e.kind, code=e.code, data=e.data)
    c.__cause__ = e.__cause__
    return c


def error_from_wire(err: object) -> SandboxdError:
    """The exception for the `error` member of a response (any JSON value:
    a daemon that breaks the protocol still gives a SandboxdError)."""
    if not isinstance(err, dict):
        return ProtocolError("malformed error object: %r" % (err,))
    data = err.get("data")
    data = data if isinstance(data, dict) else {}
    code = err.get("code")
    code = code if isinstance(code, int) else -32603
    kind = data.get("kind")
    if not isinstance(kind, str):
        kind = {v: k for k, v in reversed(list(CODES.items()))}.get(code, "internal_error")
    message = err.get("message")
    message = message if isinstance(message, str) else "(no message)"
    return class_for(kind)(message, kind=kind, code=code, data=data)
