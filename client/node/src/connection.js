// connection.js - one socket to sandboxd: framing, routing, tool calls.
//
// A Connection owns one Unix socket and reads it all the time: answers are
// matched to requests by id (they arrive in completion order), tool/call
// requests from the daemon are routed by params.execution_id to the tools of
// that execution and served concurrently (several executions, and several
// calls of one execution under `parallel`, are answered in whatever order
// their functions finish), and execution/output notifications go to the
// execution's onOutput.
//
// Framing is NDJSON split on the byte 0x0A before UTF-8 decoding, so a
// character split across reads is never damaged; one incoming line may be up
// to maxLineBytes.  Every outgoing line is checked against the daemon's
// max_message_bytes: a request over it is refused locally, and a tool answer
// over it is replaced by a tool error, so Lua gets a catchable error instead
// of waiting for an answer the daemon could not route.
//
// Writes honour the socket's backpressure: once socket.write() returns false,
// later lines (requests, tool answers, cancels) wait in order in `_queue`
// until 'drain', so the socket's own buffer never holds more than its
// highWaterMark plus one line, however fast answers are produced.
//
// When the socket closes, every waiting request is rejected (the kind given
// to close(), daemon_unavailable by default) and every execution's tool
// signal is aborted.  A Connection is never reopened: the Client makes a new
// one.

import net from 'node:net';
import { encode, encodePlain } from './json.js';
import { makeError, fromRpcError, ToolAbort } from './errors.js';

const MAX_ERROR_MESSAGE = 8192;

export class Connection {
  constructor(socketPath, { maxLineBytes = 256 * 1024 * 1024, onClose } = {}) {
    this.socketPath = socketPath;
    this.maxLineBytes = maxLineBytes;
    this.maxMessageBytes = 16 * 1024 * 1024; // until describe says otherwise
    this.nextId = 1;
    this.pending = new Map(); // request id -> { resolve, reject, execution }
    this.closed = false;
    this.closeError = null;
    this._onClose = onClose;
    this._parts = [];
    this._partsLen = 0;
    this._queue = []; // lines waiting for 'drain', in order
    this._draining = false; // socket.write() returned false; 'drain' not seen yet
    this.drainWaits = 0; // how often a write had to wait for 'drain'
    this.socket = null;
  }

  /** Connect; resolves once the socket is open, rejects with DaemonUnavailable. */
  open() {
    return new Promise((resolve, reject) => {
      const s = net.createConnection(this.socketPath);
      this.socket = s;
      s.setNoDelay?.(true);
      const fail = (err) => {
        reject(makeError('daemon_unavailable',
          `cannot connect to sandboxd at ${this.socketPath}: ${err.code ?? err.message}` +
          (err.code === 'ENOENT' ? ' (no such socket: is the daemon running? set SANDBOXD_SOCKET or socketPath)' : ''),
          { cause: err }));
      };
      const early = () => fail(new Error('the connection was closed before it was open'));
      s.once('error', fail);
      s.once('close', early); // close() while connecting emits no error
      s.once('connect', () => {
        s.off('error', fail);
        s.off('close', early);
        s.on('error', (err) => this.close('daemon_unavailable',
          `connection to sandboxd at ${this.socketPath} failed: ${err.code ?? err.message}`, err));
        s.on('data', (chunk) => this._onData(chunk));
        s.on('drain', () => this._flush());
        s.on('close', () => this.close('daemon_unavailable',
          `connection to sandboxd at ${this.socketPath} was lost`));
        this._updateRef();
        resolve(this);
      });
    });
  }

  // ---------------------------------------------------------------- reading

  _onData(chunk) {
    let start = 0;
    let nl = chunk.indexOf(10);
    while (nl !== -1) {
      let line;
      if (this._parts.length) {
        this._parts.push(chunk.subarray(start, nl));
        line = Buffer.concat(this._parts, this._partsLen + nl - start);
        this._parts = [];
        this._partsLen = 0;
      } else {
        line = chunk.subarray(start, nl);
      }
      if (line.length > this.maxLineBytes) return this._tooLong();
      this._onLine(line);
      if (this.closed) return;
      start = nl + 1;
      nl = chunk.indexOf(10, start);
    }
    if (start < chunk.length) {
      this._parts.push(start ? chunk.subarray(start) : chunk);
      this._partsLen += chunk.length - start;
      if (this._partsLen > this.maxLineBytes) this._tooLong();
    }
  }

  _tooLong() {
    this.close('daemon_unavailable', `sandboxd sent a line longer than ${this.maxLineBytes} bytes`);
  }

  _onLine(buf) {
    let end = buf.length;
    if (end && buf[end - 1] === 13) end--;
    if (end === 0) return;
    let msg;
    try {
      msg = JSON.parse(buf.toString('utf8', 0, end));
    } catch {
      return this.close('daemon_unavailable', 'sandboxd sent a line that is not JSON');
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return;
    if (typeof msg.method === 'string') {
      if (msg.id === undefined) return this._onNotification(msg);
      if (msg.method === 'tool/call') return this._onToolCall(msg);
      return this._send(`{"jsonrpc":"2.0","id":${encodePlain(msg.id)},"error":{"code":-32601,` +
        `"message":"this client serves no method ${encodePlain(msg.method)}"}}\n`);
    }
    if (msg.id === null || msg.id === undefined) {
      // An error the daemon could not tie to a request.  forbidden and busy
      // come before the daemon closes the connection: every waiter gets them.
      const kind = msg.error?.data?.kind;
      if (kind === 'forbidden' || kind === 'busy') {
        const e = fromRpcError(msg.error);
        this.close(kind, e.message, undefined, e);
      }
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    this._updateRef();
    if (msg.error !== undefined) p.reject(fromRpcError(msg.error));
    else p.resolve(msg.result);
  }

  _onNotification(msg) {
    if (msg.method !== 'execution/output') return;
    const params = msg.params ?? {};
    const p = this.pending.get(params.execution_id);
    const cb = p?.execution?.onOutput;
    if (cb && typeof params.text === 'string') {
      try {
        cb(params.text);
      } catch {
        // a failing output callback must not break the reader
      }
    }
  }

  // ------------------------------------------------------------ tool calls

  _onToolCall(msg) {
    const id = msg.id;
    const params = msg.params && typeof msg.params === 'object' ? msg.params : {};
    const p = this.pending.get(params.execution_id);
    const ex = p?.execution;
    if (!ex) return this._answerError(id, 1, 'no execution with this id is waiting on this client');
    const tool = ex.tools.get(params.tool);
    const fn = tool?.fns.get(params.function);
    const label = `${params.tool}.${params.function}`;
    if (!fn) return this._answerError(id, 1, `this client has no tool function ${label}`);
    const args = Array.isArray(params.args) ? params.args : [];
    const ctx = {
      signal: ex.controller.signal,
      executionId: params.execution_id,
      tool: params.tool,
      function: params.function,
      module: tool.module,
      callId: id,
    };
    let r;
    try {
      r = fn(...args, ctx);
    } catch (e) {
      return this._answerThrown(id, e, ex);
    }
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
      r.then((v) => this._answerValue(id, v, label), (e) => this._answerThrown(id, e, ex));
    } else {
      this._answerValue(id, r, label);
    }
  }

  _answerValue(id, value, label) {
    if (this.closed) return;
    let text;
    try {
      text = encode(value);
    } catch (e) {
      return this._answerError(id, 1, `the result cannot be sent: ${e.message}`);
    }
    const line = `{"jsonrpc":"2.0","id":${encodePlain(id)},"result":${text}}\n`;
    const size = line.length * 3 > this.maxMessageBytes ? Buffer.byteLength(line) - 1 : 0;
    if (size > this.maxMessageBytes) {
      return this._answerError(id, 1, `the result of ${label} is ${size} bytes of JSON, over the ` +
        `daemon's message limit of ${this.maxMessageBytes} bytes`);
    }
    this._send(line);
  }

  _answerThrown(id, e, ex) {
    let message = e instanceof Error ? e.message : typeof e === 'string' ? e : String(e);
    if (message.length > MAX_ERROR_MESSAGE) message = message.slice(0, MAX_ERROR_MESSAGE);
    if (e instanceof ToolAbort) {
      ex.abortCause = e;
      return this._answerError(id, 1, message, true);
    }
    const code = Number.isInteger(e?.code) ? e.code : 1;
    this._answerError(id, code, message);
  }

  _answerError(id, code, message, abort = false) {
    const err = { code, message };
    if (abort) err.data = { abort: true };
    this._send(`{"jsonrpc":"2.0","id":${encodePlain(id)},"error":${encodePlain(err)}}\n`);
  }

  // ---------------------------------------------------------------- writing

  _send(line) {
    if (this.closed) return;
    if (this._draining) {
      this._queue.push(line);
      return;
    }
    if (!this.socket.write(line)) this._blocked();
  }

  _blocked() {
    this._draining = true;
    this.drainWaits++;
  }

  // 'drain': write the waiting lines until the socket is full again.
  _flush() {
    this._draining = false;
    const q = this._queue;
    let i = 0;
    while (i < q.length && !this.closed) {
      if (!this.socket.write(q[i++])) {
        this._blocked();
        break;
      }
    }
    this._queue = i < q.length ? q.slice(i) : [];
  }

  /**
   * Send a request; resolves with its result, rejects with its error.
   * `execution` (optional) receives this request's tool calls and output.
   * Returns { id, promise }.
   */
  request(method, params, execution = null) {
    if (this.closed) {
      return { id: null, promise: Promise.reject(this.closeError) };
    }
    const id = this.nextId++;
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    let line;
    try {
      line = encodePlain(msg);
    } catch (e) {
      return { id: null, promise: Promise.reject(makeError('invalid_params', e.message, { cause: e })) };
    }
    if (line.length * 3 > this.maxMessageBytes) {
      const size = Buffer.byteLength(line);
      if (size > this.maxMessageBytes) {
        return {
          id: null,
          promise: Promise.reject(makeError('message_too_large', `the ${method} request is ${size} ` +
            `bytes, over the daemon's message limit of ${this.maxMessageBytes} bytes`)),
        };
      }
    }
    const promise = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, execution });
    });
    this._updateRef();
    this._send(line + '\n');
    return { id, promise };
  }

  notify(method, params) {
    this._send(encodePlain({ jsonrpc: '2.0', method, params }) + '\n');
  }

  /** Stop waiting for request id locally (its answer, if any, is dropped). */
  forget(id) {
    if (this.pending.delete(id)) this._updateRef();
  }

  _updateRef() {
    if (!this.socket || this.closed) return;
    if (this.pending.size) this.socket.ref();
    else this.socket.unref();
  }

  /** Close the socket; reject every waiter with `err` or an error of `kind`. */
  close(kind = 'daemon_unavailable', message = 'the connection was closed', cause, err) {
    if (this.closed) return;
    this.closed = true;
    this._queue = [];
    this.closeError = err ?? makeError(kind, message, cause ? { cause } : {});
    this.socket?.destroy();
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const p of waiting) {
      p.execution?.controller.abort(this.closeError);
      p.reject(this.closeError);
    }
    this._onClose?.(this);
  }
}
