// errors.js - the error classes of the sandboxd client.
//
// Every failure the client reports is a SandboxdError (or a subclass picked by
// `kind`): the daemon's own errors keep its `kind`, `code`, `data`, and the
// `output` and `stats` of the execution that ended; failures the client
// detects itself use the kinds `daemon_unavailable`, `unsupported`,
// `message_too_large` (an outgoing line over the daemon's limit) and
// `timeout` with `data.client_deadline = true`.  Match on `kind`, never on
// `message`.

export class SandboxdError extends Error {
  constructor(message, { kind = 'internal_error', code = null, data = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.kind = kind;
    this.code = code;
    this.data = data ?? {};
    this.output = typeof this.data.output === 'string' ? this.data.output : '';
    this.outputTruncated = this.data.output_truncated === true;
    this.stats = this.data.stats ?? null;
    this.line = this.data.line ?? null;
    this.traceback = this.data.traceback ?? null;
  }

  /** True when the same request may succeed if sent again later (busy). */
  get retryable() {
    return this.kind === 'busy';
  }
}

/** syntax_error, runtime_error: the code itself failed. */
export class LuaError extends SandboxdError {}
/** timeout, memory_limit, reductions_limit, cpu_limit, bindings_too_large, tool_call_limit. */
export class LimitExceeded extends SandboxdError {}
/** cancelled: $/cancelRequest (an aborted signal), a closed connection, a daemon shutting down. */
export class Cancelled extends SandboxdError {}
/** tool_aborted: a tool threw ToolAbort; `cause` is what it threw when thrown here. */
export class ToolAborted extends SandboxdError {}
/** busy: every worker taken and the queue full (or too many connections): retry later. */
export class Busy extends SandboxdError {}
/** forbidden: this peer may not use the daemon. */
export class Forbidden extends SandboxdError {}
/** session_not_found: the session is closed or belongs to another connection. */
export class SessionNotFound extends SandboxdError {}
/** invalid_params, limit_out_of_range, code_too_large, and the other request errors. */
export class InvalidRequest extends SandboxdError {}
/** crashed, internal_error: the worker or the daemon failed. */
export class SandboxCrashed extends SandboxdError {}
/** cannot connect, or the connection was lost while waiting. */
export class DaemonUnavailable extends SandboxdError {}
/** the daemon lacks a feature this call needs (describe's `features`). */
export class Unsupported extends SandboxdError {}

const BY_KIND = {
  syntax_error: LuaError,
  runtime_error: LuaError,
  timeout: LimitExceeded,
  memory_limit: LimitExceeded,
  reductions_limit: LimitExceeded,
  cpu_limit: LimitExceeded,
  bindings_too_large: LimitExceeded,
  tool_call_limit: LimitExceeded,
  cancelled: Cancelled,
  tool_aborted: ToolAborted,
  busy: Busy,
  forbidden: Forbidden,
  session_not_found: SessionNotFound,
  invalid_request: InvalidRequest,
  message_too_large: InvalidRequest,
  method_not_found: InvalidRequest,
  invalid_params: InvalidRequest,
  limit_out_of_range: InvalidRequest,
  code_too_large: InvalidRequest,
  parse_error: InvalidRequest,
  crashed: SandboxCrashed,
  internal_error: SandboxCrashed,
  daemon_unavailable: DaemonUnavailable,
  unsupported: Unsupported,
};

/** Build the error for `kind` (the class follows the kind). */
export function makeError(kind, message, opts = {}) {
  const Cls = BY_KIND[kind] ?? SandboxdError;
  return new Cls(message, { ...opts, kind });
}

/** The error for a JSON-RPC error object the daemon sent (hostile-safe: any shape). */
export function fromRpcError(err) {
  const e = err && typeof err === 'object' ? err : {};
  const data = e.data && typeof e.data === 'object' && !Array.isArray(e.data) ? e.data : {};
  const kind = typeof data.kind === 'string' ? data.kind : 'internal_error';
  const message = typeof e.message === 'string' ? e.message : 'error without a message';
  const code = Number.isInteger(e.code) ? e.code : null;
  return makeError(kind, message, { code, data });
}

/**
 * Throw this from a tool function to end the whole execution (tool_aborted);
 * any other thrown value becomes an error Lua can catch with pcall.
 */
export class ToolAbort extends Error {
  constructor(message = 'aborted by a tool', options) {
    super(message, options);
    this.name = 'ToolAbort';
  }
}
