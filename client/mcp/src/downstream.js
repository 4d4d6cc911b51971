// downstream.js - one downstream MCP server, as the bridge's MCP client.
//
// A server entry is either local or remote:
//   {"command": "...", "args": [...], "env": {...}, "cwd": "..."}  started over stdio (the
//       configured `env` merged onto the SDK's default environment, never the bridge's
//       whole environment; the server's stderr goes to the bridge's stderr);
//   {"url": "https://...", "headers": {...}, "type": "http" | "sse"}  reached over Streamable
//       HTTP, falling back to the older HTTP+SSE transport when the Streamable HTTP
//       handshake fails with an HTTP 4xx other than 401/403 (what the MCP specification
//       asks of clients that support both); "type": "sse" goes to SSE directly.
// resolveSpec() checks an entry and expands `${NAME}` in its url, headers and env values
// from the bridge's environment (`$$` is a literal `$`); a variable that is not set is an
// error of the configuration, so the bridge does not start.
//
// A Downstream connects, lists its tools (every page), applies the `allow`/`deny` lists,
// and re-lists when the server sends notifications/tools/list_changed (then calls
// onToolsChanged).  call() runs one tool with the caller's abort signal and timeout.
//
// State: `tools` is the current list; `error` is set when the server failed to start (it
// is then left out) and `exited` once it is gone.  close() stops a local server (the SDK
// closes its stdin, then SIGTERM, then SIGKILL) and ends a remote server's session.
//
// A remote server can go away and come back, so it is never `exited`: a call that cannot
// reach it, a 404 for its session, or a stream that breaks while the server no longer
// answers a ping, sets `lost`.  The calls in flight then fail at once (the SDK would leave
// them waiting for their timeout), each with a message that says whether the call was
// made; the next call first opens a new MCP session (a call refused with 404 is made again
// in it, as the MCP specification asks of a client whose session has expired).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const VERSION = '1.0.0';
export const CONFIRM = ['destructive', 'all', 'none'];
const TYPES = { http: 'http', 'streamable-http': 'http', streamableHttp: 'http', sse: 'sse', stdio: 'stdio' };

/** Expand `${NAME}` (and `$$`) in s from env; `where` names the field in errors. */
export function expand(s, env, where) {
  if (typeof s !== 'string') throw new Error(`${where} must be a string`);
  return s.replace(/\$\$|\$\{([^}]*)\}/g, (m, name) => {
    if (m === '$$') return '$';
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new Error(`${where}: "\${${name}}" is not an environment variable name`);
    }
    if (env[name] === undefined) {
      throw new Error(`${where} names the environment variable ${name}, which is not set`);
    }
    return env[name];
  });
}

function strings(obj, env, where) {
  if (obj === undefined) return undefined;
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) throw new Error(`"${where}" must be an object`);
  return Object.fromEntries(Object.entries(obj).map(([k, v]) =>
    [k, expand(typeof v === 'number' || typeof v === 'boolean' ? String(v) : v, env, `${where}.${k}`)]));
}

/**
 * The checked entry: {kind: 'stdio', command, args, env, cwd} or {kind: 'http' | 'sse' |
 * 'auto', url, headers}, with allow, deny and confirm.  Throws on a bad entry.
 */
export function resolveSpec(spec, env = process.env) {
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) throw new Error('its entry must be an object');
  const out = { allow: spec.allow, deny: spec.deny };
  for (const k of ['allow', 'deny']) {
    if (spec[k] !== undefined && !(Array.isArray(spec[k]) && spec[k].every((x) => typeof x === 'string'))) {
      throw new Error(`"${k}" must be a list of tool names`);
    }
  }
  const c = spec.confirm;
  if (c !== undefined && !CONFIRM.includes(c) && !(Array.isArray(c) && c.every((x) => typeof x === 'string'))) {
    throw new Error(`"confirm" takes ${CONFIRM.join(', ')} or a list of tool names, not ${JSON.stringify(c)}`);
  }
  out.confirm = c;
  const type = spec.type ?? spec.transport;
  if (type !== undefined && !TYPES[type]) {
    throw new Error(`"type" ${JSON.stringify(type)} is not one of ${Object.keys(TYPES).join(', ')}`);
  }
  if (spec.url !== undefined) {
    if (spec.command !== undefined) throw new Error('it has both "url" and "command"');
    if (TYPES[type] === 'stdio') throw new Error('"type": "stdio" needs a "command", not a "url"');
    const url = expand(spec.url, env, '"url"');
    let parsed;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error(`"url" ${JSON.stringify(spec.url)} is not a URL`);
    }
    if (!['http:', 'https:'].includes(parsed.protocol)) throw new Error(`"url" must be http: or https:, not ${parsed.protocol}`);
    out.kind = type === undefined ? 'auto' : TYPES[type];
    out.url = parsed;
    out.headers = strings(spec.headers, env, 'headers') ?? {};
    return out;
  }
  if (type !== undefined && TYPES[type] !== 'stdio') throw new Error(`"type": "${type}" needs a "url"`);
  const { command, args = [], cwd } = spec;
  if (typeof command !== 'string' || command === '') throw new Error('it has neither "command" nor "url"');
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) throw new Error('"args" must be an array of strings');
  return { ...out, kind: 'stdio', command, args, cwd, env: strings(spec.env, env, 'env') };
}

/** Network errors under fetch that say the request never reached the server. */
const UNSENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * What a failed fetch says (its "fetch failed" says nothing): {why, unsent}, or null when
 * e is not a network failure.
 */
function networkFailure(e) {
  if (!(e instanceof TypeError) || e.message !== 'fetch failed') return null;
  const c = e.cause;
  return { why: c?.message || c?.code || 'fetch failed', unsent: UNSENT.has(c?.code) };
}

/** Why a request failed, in the fewest words (the SSE transport wraps fetch's failure in two prefixes). */
function reason(e) {
  return networkFailure(e)?.why ?? String(e?.message ?? e).replace(/^SSE error: (TypeError: )?fetch failed: /, '');
}

/** The SDK's transports report a broken SSE stream only to onerror, with these. */
const BROKEN_STREAM = /^(SSE stream disconnected|Failed to reconnect|Maximum reconnection attempts|SSE error)/;

/** Streamable HTTP failed in a way that says the server may only speak the older SSE transport. */
function sseMayWork(e) {
  return e instanceof StreamableHTTPError && typeof e.code === 'number' && e.code >= 400 && e.code < 500 &&
    e.code !== 401 && e.code !== 403;
}

export class Downstream {
  /**
   * @param {string} name
   * @param {object} spec  a resolveSpec() entry
   */
  constructor(name, spec, { log, onToolsChanged, startTimeoutMs = 20000 } = {}) {
    this.name = name;
    this.spec = spec;
    this.log = log ?? (() => {});
    this.onToolsChanged = onToolsChanged ?? (() => {});
    this.startTimeoutMs = startTimeoutMs;
    this.tools = [];
    this.error = null;
    this.exited = null;
    this.client = null;
    this.transport = null;
    this.via = null; // 'stdio' | 'http' | 'sse' once connected
    this.lost = null; // why a remote server's connection was lost, until a new session opens
    this.inflight = new Set(); // the AbortControllers of the calls running
    this.probing = null; // the ping of _probe()
    this.reconnecting = null; // the new session _again() is opening
  }

  _transport(kind) {
    const s = this.spec;
    if (kind === 'stdio') {
      return new StdioClientTransport({ command: s.command, args: s.args, env: s.env, cwd: s.cwd, stderr: 'inherit' });
    }
    const requestInit = { headers: s.headers };
    if (kind === 'sse') return new SSEClientTransport(s.url, { requestInit });
    return new StreamableHTTPClientTransport(s.url, { requestInit });
  }

  async _connect(kind, timeoutMs = this.startTimeoutMs) {
    this.transport = this._transport(kind);
    const client = new Client({ name: 'sandboxd-mcp', version: VERSION });
    this.client = client;
    let up = false; // a handshake that fails closes its client: that is not an exit
    client.onclose = () => {
      if (up && this.client === client && !this.exited) this.exited = kind === 'stdio' ? 'the server exited' : 'the connection closed';
    };
    if (kind !== 'stdio') {
      client.onerror = (e) => {
        if (up && this.client === client && !this.lost && BROKEN_STREAM.test(e?.message ?? '')) this._probe(client);
      };
    }
    let timer;
    try {
      await Promise.race([
        this.client.connect(this.transport),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no MCP handshake within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (e) {
      this.client = null;
      await client.close().catch(() => {});
      throw e;
    } finally {
      clearTimeout(timer);
    }
    up = true;
    this.via = kind;
  }

  async start() {
    const { kind } = this.spec;
    try {
      if (kind === 'auto') {
        try {
          await this._connect('http');
        } catch (e) {
          if (!sseMayWork(e)) throw e;
          this.log(`server "${this.name}": Streamable HTTP failed (HTTP ${e.code}: ${e.message}); trying SSE`);
          try {
            await this._connect('sse');
          } catch (e2) {
            throw new Error(`Streamable HTTP: ${e.message}; SSE: ${e2.message}`);
          }
        }
      } else {
        await this._connect(kind);
      }
      await this._listen();
    } catch (e) {
      this.error = `failed to start: ${e.message}`;
      this.log(`server "${this.name}" ${this.error}; it is left out`);
      await this.close();
    }
    return this;
  }

  /** Follow the server's list of tools, and read it now. */
  async _listen() {
    this.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.relist().then(() => this.onToolsChanged(this), (e) => {
        this.log(`server "${this.name}": re-listing tools failed: ${e.message}`);
      });
    });
    await this.relist();
  }

  /** A stream broke: a server that no longer answers a ping is lost, and its calls with it. */
  _probe(client) {
    if (this.probing) return;
    this.probing = client.ping({ timeout: 3000 }).then(() => {}, (e) => {
      if (this.client !== client || this.lost) return;
      this._lose(reason(e));
    }).finally(() => { this.probing = null; });
  }

  _lose(why) {
    this.lost = why;
    this.log(`server "${this.name}": connection lost (${why}); the next call opens a new session`);
    for (const c of this.inflight) {
      c.abort(new Error(`server "${this.name}" closed the connection during the call (${why}); it may or may not have run`));
    }
  }

  /**
   * Open a new MCP session with a lost remote server (the old client is dropped), once for
   * every call that asks at the same time; rejects with the message for those calls.
   */
  _again(timeoutMs) {
    this.reconnecting ??= (async () => {
      const old = this.client;
      const before = JSON.stringify(this.tools);
      this.client = null;
      old?.close().catch(() => {});
      try {
        await this._connect(this.via, Math.min(timeoutMs ?? Infinity, this.startTimeoutMs));
        await this._listen();
      } catch (e) {
        this.lost = reason(e);
        throw new Error(`server "${this.name}" cannot be reached (${this.lost}); the call was not made`);
      }
      this.log(`server "${this.name}": connected again, in a new session`);
      this.lost = null;
      if (JSON.stringify(this.tools) !== before) this.onToolsChanged(this);
    })().finally(() => { this.reconnecting = null; });
    return this.reconnecting;
  }

  /** Fetch every page of tools/list and apply allow/deny. */
  async relist() {
    const all = [];
    let cursor;
    for (let page = 0; page < 1000; page++) {
      const r = await this.client.listTools(cursor ? { cursor } : undefined);
      all.push(...(Array.isArray(r.tools) ? r.tools : []));
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    const { allow, deny } = this.spec;
    this.tools = all.filter((t) => typeof t?.name === 'string' &&
      (!Array.isArray(allow) || allow.includes(t.name)) &&
      (!Array.isArray(deny) || !deny.includes(t.name)));
  }

  get running() {
    return (this.client !== null || this.lost !== null) && !this.error && !this.exited;
  }

  /** Call tool `name`; resolves the MCP result, rejects on protocol errors. */
  async call(name, args, opts = {}) {
    if (!this.running) {
      throw new Error(`server "${this.name}" is not running (${this.exited ?? this.error ?? 'stopped'})`);
    }
    if (this.lost) await this._again(opts.timeout);
    try {
      return await this._call(name, args, opts);
    } catch (e) {
      const net = networkFailure(e);
      if (net && this.via !== 'stdio') {
        if (!this.lost) this._lose(net.why);
        throw new Error(net.unsent ? `server "${this.name}" cannot be reached (${net.why}); the call was not made`
          : `server "${this.name}": the connection failed during the call (${net.why}); it may or may not have run`);
      }
      // 404: the server no longer knows the session (it restarted), and did not run the call
      if (!(e instanceof StreamableHTTPError && e.code === 404)) throw e;
      if (!this.lost) this._lose('HTTP 404: the server ended the session');
      await this._again(opts.timeout);
      return this._call(name, args, opts);
    }
  }

  async _call(name, args, { signal, timeout, onprogress } = {}) {
    // The SDK never removes its listener from the signal it is given, so a
    // signal aborted after the call finished would still send the server a
    // notifications/cancelled for it.  Each call gets its own signal, linked
    // to the caller's only while the call runs (and aborted by _lose()).
    const own = new AbortController();
    const onAbort = () => own.abort(signal.reason);
    if (signal?.aborted) own.abort(signal.reason);
    else signal?.addEventListener('abort', onAbort, { once: true });
    this.inflight.add(own);
    try {
      return await this.client.callTool({ name, arguments: args }, undefined,
        { signal: own.signal, timeout, onprogress, resetTimeoutOnProgress: false });
    } catch (e) {
      if (this.exited) throw new Error(`server "${this.name}" ${this.via === 'stdio' ? 'exited' : 'closed the connection'} during the call (${e.message})`);
      // lost while it ran: the reason _lose() gave, not the SDK's wrapping of it
      if (own.signal.aborted && !signal?.aborted && own.signal.reason instanceof Error) throw own.signal.reason;
      throw e;
    } finally {
      this.inflight.delete(own);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close() {
    const c = this.client;
    const t = this.transport;
    if (!this.exited) this.exited = 'stopped';
    try {
      // a remote server's session ends with a DELETE, at most a second's wait
      if (c && t instanceof StreamableHTTPClientTransport && t.sessionId) {
        let timer;
        await Promise.race([t.terminateSession().catch(() => {}),
          new Promise((r) => { timer = setTimeout(r, 1000); })]).finally(() => clearTimeout(timer));
      }
      if (c) await c.close();
      else await t?.close();
    } catch {
      // already gone
    }
  }
}
