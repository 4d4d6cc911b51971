// Type declarations of the sandboxd Node client (see README.md).  `make
// test-node` checks them with `tsc --noEmit` (tsconfig.json: this file and
// test/usage.ts, which uses the whole API) and against the code
// (test/types.test.mjs: every export, method and property declared here
// exists, and every public one of the code is declared).

/** Opaque state returned by an execution; hand it back unchanged. */
export type Bindings = unknown[];

/** The execution's figures, as the daemon reports them (docs/protocol.md). */
export interface Stats {
  wall_us: number;
  cpu_us: number;
  reductions: number;
  heap_peak_bytes: number;
  tool_calls: number;
}

export interface ExecuteResult<T = unknown> {
  value: T;
  bindings: Bindings;
  bindingNames: string[];
  output: string;
  outputTruncated: boolean;
  stats: Stats | null;
}

/** What every tool function receives after its Lua arguments. */
export interface ToolContext {
  /** Aborted when the execution ends (answered, cancelled, timed out, connection lost). */
  signal: AbortSignal;
  executionId: string | number;
  tool: string;
  function: string;
  module: string;
  callId: string;
}

export type ToolFn = (...args: any[]) => unknown | Promise<unknown>;
export interface ToolSpec {
  fn: ToolFn;
  /** Argument counts the daemon accepts; others raise a Lua error without a call. */
  arities?: number[];
}
/** A Lua table: its functions, and optionally `__module`. An object with methods works too. */
export type Tool = { __module?: string } & { [fn: string]: ToolFn | ToolSpec | string | undefined } | object;
export type Tools = Record<string, Tool>;

export type Limit = number | 'infinity';
export interface Limits {
  max_heap?: Limit;
  max_reductions?: Limit;
  cpu_ms?: Limit;
  priority?: 'low' | 'normal' | 'high';
  max_output_bytes?: number;
  max_bindings_bytes?: number;
  max_tool_calls?: Limit;
  [key: string]: unknown;
}

export interface ExecuteOptions {
  tools?: Tools;
  bindings?: Bindings;
  timeoutMs?: Limit;
  limits?: Limits;
  /** Aborting it sends $/cancelRequest and rejects with Cancelled. */
  signal?: AbortSignal;
  /** Live output (needs the daemon's "stream_output" feature). */
  onOutput?: (text: string) => void;
  /** Client-side deadline in ms from the call, queue time included; null for none. Default: timeout + deadlineGraceMs. */
  deadlineMs?: number | null;
}

export interface SessionExecuteOptions extends Omit<ExecuteOptions, 'tools' | 'bindings'> {
  returnBindings?: boolean;
}

export interface SessionOptions {
  tools?: Tools;
  bindings?: Bindings;
  timeoutMs?: Limit;
  limits?: Limits;
  idleTimeoutMs?: number;
}

export interface ClientOptions {
  /** Default: $SANDBOXD_SOCKET, then /run/sandboxd/sandboxd.sock. */
  socketPath?: string;
  /** The same as socketPath (socketPath wins). */
  socket?: string;
  /** How long a cancelled call waits for the daemon's answer (500 ms). */
  cancelGraceMs?: number;
  /** Added to the timeout for the client-side deadline (1000 ms). */
  deadlineGraceMs?: number;
  /** The longest line accepted from the daemon (256 MiB). */
  maxLineBytes?: number;
}

export interface PromptInfo {
  language: string;
  constraints: string;
  tool_usage: string;
}

export class Client {
  constructor(opts?: ClientOptions);
  readonly socketPath: string;
  readonly cancelGraceMs: number;
  readonly deadlineGraceMs: number;
  readonly maxLineBytes: number | undefined;
  execute<T = unknown>(code: string, opts?: ExecuteOptions): Promise<ExecuteResult<T>>;
  check(code: string, opts?: { tools?: Tools; timeoutMs?: Limit; limits?: Limits }): Promise<{ ok: true }>;
  bindingNames(bindings: Bindings): Promise<string[]>;
  promptInfo(opts?: { session?: boolean }): Promise<PromptInfo>;
  describe(): Promise<Record<string, any>>;
  ping(): Promise<Record<string, never>>;
  features(): Promise<Set<string>>;
  session(opts?: SessionOptions): Promise<Session>;
  /** Close the connection; waiting calls are rejected and the daemon cancels their executions. */
  close(): void;
  /** close(), for `await using` (defined where the runtime has Symbol.asyncDispose). */
  [Symbol.asyncDispose](): Promise<void>;
}

export class Session {
  /** The daemon's id of the session. */
  readonly id: string;
  readonly client: Client;
  /** The session's default timeout, as given to session(). */
  readonly timeoutMs: Limit | undefined;
  execute<T = unknown>(code: string, opts?: SessionExecuteOptions): Promise<ExecuteResult<T>>;
  snapshot(): Promise<{ bindings: Bindings; bindingNames: string[] }>;
  close(): Promise<void>;
  /** close(), for `await using`; a session the daemon already ended is no error. */
  [Symbol.asyncDispose](): Promise<void>;
}

export class SandboxdError extends Error {
  constructor(message: string, opts?: { kind?: string; code?: number | null; data?: Record<string, any>; cause?: unknown });
  /** The daemon's data.kind, or daemon_unavailable / unsupported / message_too_large from the client. */
  kind: string;
  code: number | null;
  data: Record<string, any>;
  output: string;
  outputTruncated: boolean;
  stats: Stats | null;
  line: number | null;
  traceback: string | null;
  readonly retryable: boolean;
}
export class LuaError extends SandboxdError {}
export class LimitExceeded extends SandboxdError {}
export class Cancelled extends SandboxdError {}
export class ToolAborted extends SandboxdError {}
export class Busy extends SandboxdError {}
export class Forbidden extends SandboxdError {}
export class SessionNotFound extends SandboxdError {}
export class InvalidRequest extends SandboxdError {}
export class SandboxCrashed extends SandboxdError {}
export class DaemonUnavailable extends SandboxdError {}
export class Unsupported extends SandboxdError {}
/** Throw from a tool to end the whole execution (tool_aborted). */
export class ToolAbort extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}

/** The JSON text the client sends for a value (throws TypeError for what JSON cannot carry). */
export function encodeJson(value: unknown): string;
