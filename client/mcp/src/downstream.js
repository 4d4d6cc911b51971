// downstream.js - one downstream MCP server, as the bridge's MCP client.
//
// A Downstream starts its server over stdio (the configured `env` merged
// onto the SDK's default environment, never the bridge's whole environment;
// the server's stderr goes to the bridge's stderr), lists its tools (every
// page), applies the `allow`/`deny` lists, and re-lists when the server sends
// notifications/tools/list_changed (then calls onToolsChanged).  call() runs
// one tool with the caller's abort signal and timeout.
//
// State: `tools` is the current list; `error` is set when the server failed
// to start (it is then left out) and `exited` once it is gone.  close()
// stops the server process (the SDK closes its stdin, then SIGTERM, then
// SIGKILL).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const VERSION = '1.0.0';

export class Downstream {
  constructor(name, spec, { log, onToolsChanged, startTimeoutMs = 20000 } = {}) {
    this.name = name;
    this.spec = spec ?? {};
    this.log = log ?? (() => {});
    this.onToolsChanged = onToolsChanged ?? (() => {});
    this.startTimeoutMs = startTimeoutMs;
    this.tools = [];
    this.error = null;
    this.exited = null;
    this.client = null;
    this.transport = null;
  }

  async start() {
    const { command, args = [], env, cwd } = this.spec;
    try {
      if (typeof command !== 'string' || command === '') {
        throw new Error('no "command" in its configuration (only stdio servers are supported)');
      }
      if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
        throw new Error('"args" must be an array of strings');
      }
      this.transport = new StdioClientTransport({
        command,
        args,
        env: env && typeof env === 'object' ? Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) : undefined,
        cwd,
        stderr: 'inherit',
      });
      this.client = new Client({ name: 'sandboxd-mcp', version: VERSION });
      this.client.onclose = () => {
        if (!this.exited) this.exited = 'the server exited';
      };
      let timer;
      await Promise.race([
        this.client.connect(this.transport),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no MCP handshake within ${this.startTimeoutMs} ms`)),
            this.startTimeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
      this.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        this.relist().then(() => this.onToolsChanged(this), (e) => {
          this.log(`server "${this.name}": re-listing tools failed: ${e.message}`);
        });
      });
      await this.relist();
    } catch (e) {
      this.error = `failed to start: ${e.message}`;
      this.log(`server "${this.name}" ${this.error}; it is left out`);
      await this.close();
    }
    return this;
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
    return this.client !== null && !this.error && !this.exited;
  }

  /** Call tool `name`; resolves the MCP result, rejects on protocol errors. */
  async call(name, args, { signal, timeout, onprogress } = {}) {
    if (!this.running) {
      throw new Error(`server "${this.name}" is not running (${this.exited ?? this.error ?? 'stopped'})`);
    }
    // The SDK never removes its listener from the signal it is given, so a
    // signal aborted after the call finished would still send the server a
    // notifications/cancelled for it.  Each call gets its own signal, linked
    // to the caller's only while the call runs.
    const own = new AbortController();
    const onAbort = () => own.abort(signal.reason);
    if (signal?.aborted) own.abort(signal.reason);
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.client.callTool({ name, arguments: args }, undefined,
        { signal: own.signal, timeout, onprogress, resetTimeoutOnProgress: false });
    } catch (e) {
      if (this.exited) throw new Error(`server "${this.name}" exited during the call (${e.message})`);
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close() {
    const c = this.client;
    if (!this.exited) this.exited = 'stopped';
    try {
      if (c) await c.close();
      else await this.transport?.close();
    } catch {
      // already gone
    }
  }
}
