// client.js - the public Client and Session of the sandboxd package.
//
// A Client holds at most one Connection, opened on first use and reopened on
// the next call after it was lost (pending calls fail with
// DaemonUnavailable; nothing is retried behind the caller's back).  Opening
// asks `describe` once, for the daemon's message limit, default timeout and
// `features`.  Every method may run concurrently with the others on the same
// client.
//
// execute() ends in one of three ways: the daemon's answer; the caller's
// AbortSignal (a $/cancelRequest is sent, the tools' signal aborted, and the
// daemon's cancelled answer awaited for at most cancelGraceMs); or the
// client-side deadline, which covers time in the daemon's queue as well:
// by default the execution's timeout plus deadlineGraceMs, counted from the
// call.  The execution's tool signal is aborted whenever it ends.
//
// Where the runtime defines Symbol.asyncDispose (Node 18.18+, 20), a Client
// and a Session are async disposables: `await using client = new Client()`
// closes it at the end of the block (in runtimes whose syntax has `await
// using`; elsewhere `await client[Symbol.asyncDispose]()` does the same).

import { Connection } from './connection.js';
import { compileTools } from './tools.js';
import { makeError, Cancelled, SandboxdError, SessionNotFound } from './errors.js';

const DEFAULT_SOCKET = '/run/sandboxd/sandboxd.sock';
// The reason the tools' signal carries once an execution has ended normally.
const ENDED = makeError('cancelled', 'the execution ended');

function defaultSocket() {
  return process.env.SANDBOXD_SOCKET || DEFAULT_SOCKET;
}

function result(r) {
  return {
    value: r?.value ?? null,
    bindings: r?.bindings ?? [],
    bindingNames: r?.binding_names ?? [],
    output: r?.output ?? '',
    outputTruncated: r?.output_truncated === true,
    stats: r?.stats ?? null,
  };
}

export class Client {
  /**
   * @param {object} [opts]
   * @param {string} [opts.socketPath] default $SANDBOXD_SOCKET, then /run/sandboxd/sandboxd.sock
   * @param {number} [opts.cancelGraceMs=500] how long a cancelled call waits for the daemon's answer
   * @param {number} [opts.deadlineGraceMs=1000] added to the timeout for the client-side deadline
   * @param {number} [opts.maxLineBytes] the longest line accepted from the daemon (256 MiB)
   */
  constructor(opts = {}) {
    this.socketPath = opts.socketPath ?? opts.socket ?? defaultSocket();
    this.cancelGraceMs = opts.cancelGraceMs ?? 500;
    this.deadlineGraceMs = opts.deadlineGraceMs ?? 1000;
    this.maxLineBytes = opts.maxLineBytes;
    this._conn = null; // Promise<Connection>
    this._closed = false;
  }

  /** The open connection (opened and described on first use). */
  _connection() {
    if (this._closed) return Promise.reject(makeError('daemon_unavailable', 'the client is closed'));
    if (this._conn) return this._conn;
    const conn = new Connection(this.socketPath, {
      maxLineBytes: this.maxLineBytes,
      onClose: (c) => {
        if (this._current === c) {
          this._conn = null;
          this._current = null;
        }
      },
    });
    this._current = conn;
    const p = conn.open().then(async () => {
      const d = await conn.request('describe').promise;
      const daemon = d?.daemon ?? {};
      if (Number.isInteger(daemon.max_message_bytes)) conn.maxMessageBytes = daemon.max_message_bytes;
      conn.features = new Set(Array.isArray(d?.features) ? d.features : []);
      conn.defaultTimeout = d?.defaults?.timeout_ms ?? 60000;
      conn.description = d;
      return conn;
    });
    this._conn = p;
    p.catch(() => {
      if (this._conn === p) {
        this._conn = null;
        this._current = null;
      }
      conn.close();
    });
    return p;
  }

  async _call(method, params) {
    const conn = await this._connection();
    return conn.request(method, params).promise;
  }

  /** The daemon's `features` (version 1.1 capabilities), as a Set. */
  async features() {
    return (await this._connection()).features;
  }

  async _require(feature, what) {
    const conn = await this._connection();
    if (!conn.features.has(feature)) {
      throw makeError('unsupported', `${what} needs a daemon with the "${feature}" feature; this ` +
        `daemon's describe lists features [${[...conn.features].join(', ')}]`);
    }
    return conn;
  }

  /**
   * Run a Lua chunk.  Resolves { value, bindings, bindingNames, output,
   * outputTruncated, stats }; rejects with a SandboxdError.
   */
  async execute(code, opts = {}) {
    return this._execute(code, opts, null);
  }

  async _execute(code, opts, session) {
    const t0 = Date.now();
    const signal = opts.signal;
    if (signal?.aborted) {
      throw makeError('cancelled', 'the execution was cancelled before it was sent', { cause: signal.reason });
    }
    const conn = opts.onOutput
      ? await this._require('stream_output', 'onOutput (live output)')
      : await this._connection();
    const params = { code };
    let table;
    if (session) {
      params.session = session.id;
      table = session._table;
      if (opts.returnBindings) params.return_bindings = true;
    } else {
      const t = compileTools(opts.tools);
      table = t.table;
      if (t.wire.length) params.tools = t.wire;
      if (opts.bindings !== undefined && opts.bindings !== null) params.bindings = opts.bindings;
    }
    if (opts.timeoutMs !== undefined && opts.timeoutMs !== null) params.timeout_ms = opts.timeoutMs;
    if (opts.limits) params.limits = opts.limits;
    if (opts.onOutput) params.stream_output = true;

    const execution = {
      tools: table,
      controller: new AbortController(),
      onOutput: opts.onOutput ?? null,
      abortCause: null,
    };
    const { id, promise } = conn.request('execute', params, execution);
    if (id === null) return promise.then(result);

    const timeout = params.timeout_ms ?? session?.timeoutMs ?? conn.defaultTimeout;
    let deadline = opts.deadlineMs;
    if (deadline === undefined) {
      deadline = typeof timeout === 'number' ? timeout + this.deadlineGraceMs : null;
    }
    return new Promise((resolve, reject) => {
      let ending = null; // 'signal' | 'deadline' once the client gave up waiting
      let grace = null;
      let timer = null;
      const finish = () => {
        clearTimeout(timer);
        clearTimeout(grace);
        signal?.removeEventListener('abort', onAbort);
        execution.controller.abort(ENDED);
      };
      const giveUp = (why) => {
        if (ending) return;
        ending = why;
        conn.notify('$/cancelRequest', { id });
        execution.controller.abort(why === 'signal' ? signal.reason
          : makeError('timeout', 'the client-side deadline passed'));
        grace = setTimeout(() => {
          conn.forget(id);
          finish();
          reject(localError(why, null));
        }, this.cancelGraceMs);
      };
      const localError = (why, daemonErr) => {
        const data = { ...(daemonErr?.data ?? {}) };
        if (why === 'signal') {
          data.kind = 'cancelled';
          return makeError('cancelled', 'the execution was cancelled by its AbortSignal',
            { code: -32800, data, cause: signal.reason });
        }
        data.kind = 'timeout';
        data.client_deadline = true;
        return makeError('timeout', `no answer within the client-side deadline of ${deadline} ms ` +
          '(time in the queue included)', { code: -32003, data });
      };
      const onAbort = () => giveUp('signal');
      signal?.addEventListener('abort', onAbort, { once: true });
      if (typeof deadline === 'number' && Number.isFinite(deadline)) {
        timer = setTimeout(() => giveUp('deadline'), Math.max(0, deadline - (Date.now() - t0)));
      }
      promise.then((r) => {
        finish();
        if (ending === 'signal') reject(localError('signal', { data: r }));
        else resolve(result(r));
      }, (e) => {
        finish();
        if (ending && e instanceof SandboxdError && e.kind === 'cancelled') e = localError(ending, e);
        else if (ending === 'signal' && !(e instanceof Cancelled)) e = localError('signal', e);
        if (e.kind === 'tool_aborted' && execution.abortCause && e.cause === undefined) {
          Object.defineProperty(e, 'cause', { value: execution.abortCause, configurable: true, writable: true });
        }
        reject(e);
      });
    });
  }

  /** Compile a chunk in a worker without running it; resolves { ok: true }. */
  async check(code, opts = {}) {
    const params = { code };
    const t = compileTools(opts.tools);
    if (t.wire.length) params.tools = t.wire;
    if (opts.timeoutMs !== undefined) params.timeout_ms = opts.timeoutMs;
    if (opts.limits) params.limits = opts.limits;
    return this._call('check', params);
  }

  /** The global names held in bindings (asks the daemon, which validates them). */
  async bindingNames(bindings) {
    return this._call('binding_names', { bindings });
  }

  /** { language, constraints, tool_usage } for a system prompt; { session: true } for session mode. */
  async promptInfo(opts = {}) {
    return this._call('prompt_info', opts.session ? { session: true } : undefined);
  }

  async describe() {
    return this._call('describe');
  }

  async ping() {
    return this._call('ping');
  }

  /**
   * Open a session (one worker that keeps its Lua state between chunks).
   * Needs the daemon's "sessions" feature.
   */
  async session(opts = {}) {
    const conn = await this._require('sessions', 'session()');
    const t = compileTools(opts.tools);
    const params = {};
    if (t.wire.length) params.tools = t.wire;
    if (opts.bindings) params.bindings = opts.bindings;
    if (opts.timeoutMs !== undefined) params.timeout_ms = opts.timeoutMs;
    if (opts.limits) params.limits = opts.limits;
    if (opts.idleTimeoutMs !== undefined) params.idle_timeout_ms = opts.idleTimeoutMs;
    const r = await conn.request('session/open', params).promise;
    return new Session(this, conn, r.session, t.table, opts.timeoutMs);
  }

  /** Close the connection; waiting calls are rejected and the daemon cancels their executions. */
  close() {
    this._closed = true;
    const c = this._current;
    this._conn = null;
    this._current = null;
    c?.close('cancelled', 'the client was closed');
  }
}

export class Session {
  constructor(client, conn, id, table, timeoutMs) {
    this.client = client;
    this.id = id;
    this.timeoutMs = timeoutMs;
    this._conn = conn;
    this._table = table;
  }

  /** Run a chunk in this session (state kept); options as Client.execute, plus returnBindings. */
  async execute(code, opts = {}) {
    if (opts.tools || opts.bindings) {
      throw new TypeError('a session chunk takes no tools or bindings (they are fixed when the session opens)');
    }
    await this._same();
    return this.client._execute(code, opts, this);
  }

  /** { bindings, bindingNames } of the session's globals. */
  async snapshot() {
    await this._same();
    const r = await this._conn.request('session/snapshot', { session: this.id }).promise;
    return { bindings: r.bindings, bindingNames: r.binding_names };
  }

  async close() {
    if (this._conn.closed) return;
    await this._conn.request('session/close', { session: this.id }).promise;
  }

  async _same() {
    const conn = await this.client._connection();
    if (conn !== this._conn) {
      throw makeError('session_not_found', `session ${this.id} ended with the connection that opened it`);
    }
  }
}

// The disposers, defined only where the symbol exists (no polyfill: a
// symbol of our own would not be the one `await using` looks up).  Disposing
// a session the daemon already ended (a timeout, a closed connection) is
// not an error.
if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(Client.prototype, Symbol.asyncDispose, {
    async value() { this.close(); },
    writable: true, configurable: true,
  });
  Object.defineProperty(Session.prototype, Symbol.asyncDispose, {
    async value() {
      try {
        await this.close();
      } catch (e) {
        if (!(e instanceof SessionNotFound)) throw e;
      }
    },
    writable: true, configurable: true,
  });
}
