// bridge.js - sandboxd-mcp: an MCP server whose one tool runs Lua in
// sandboxd, and whose Lua calls the tools of the downstream MCP servers.
//
// Bridge.start() connects to every downstream server of the config (in
// parallel; one that fails is left out and named in the description and on
// stderr), maps server and tool names to Lua identifiers (names.js), and
// serves `execute_lua` ({code, reset?}) on the given transport.  Each
// execute_lua call is one sandboxd execution, run one at a time in arrival
// order; globals persist between calls as the bridge's bindings (reset:
// true clears them).  Lua sees one table per server and one function per
// tool taking one table argument; each call is relayed to callTool with the
// execution's abort signal and its remaining time, and the result unwrapped
// (unwrap.js).  Host cancellation (notifications/cancelled) aborts the
// execution.  A downstream tools/list_changed rebuilds the catalog and
// tells the host (notifications/tools/list_changed).
//
// Errors of the bridge itself go to `log` (stderr): stdout is the protocol.

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Sandboxd } from 'sandboxd';
import { Downstream } from './downstream.js';
import { luaName } from './names.js';
import { toLuaValue } from './unwrap.js';

export const VERSION = '0.1.0';
const TOOL = 'execute_lua';

function luaType(v) {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'object') return 'table';
  return typeof v;
}

function argSummary(schema) {
  const props = schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object'
    ? schema.properties : {};
  const req = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const parts = Object.entries(props).map(([k, p]) => {
    let t = p && typeof p === 'object' ? (Array.isArray(p.enum) ? p.enum.map((x) => JSON.stringify(x)).join('|') : p.type) : null;
    if (Array.isArray(t)) t = t.join('|');
    const key = /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : `["${k}"]`;
    return `${key}${req.has(k) ? '' : '?'}${t ? `: ${t}` : ''}`;
  });
  return `{${parts.join(', ')}}`;
}

function firstLine(s, max = 240) {
  const line = String(s ?? '').split('\n').map((l) => l.trim()).find((l) => l) ?? '';
  return line.length > max ? `${line.slice(0, max - 3)}...` : line;
}

export class Bridge {
  /**
   * @param {object} opts
   * @param {object} opts.config   {mcpServers: {NAME: {command, args?, env?, cwd?, allow?, deny?}}}
   * @param {string} [opts.socketPath]  sandboxd's socket (default $SANDBOXD_SOCKET, then the system path)
   * @param {number} [opts.timeoutMs=55000] timeout_ms of each execution (below the SDK's 60 s request timeout)
   * @param {number} [opts.maxResultChars=24000] cut of the text rendering of a result
   * @param {object} [opts.limits] execute's `limits` for every execution (e.g. {priority: 'normal'})
   * @param {(line: string) => void} [opts.log] the bridge's own messages (default: stderr)
   */
  constructor({ config, socketPath, timeoutMs = 55000, maxResultChars = 24000, limits, log } = {}) {
    const servers = config?.mcpServers;
    if (!servers || typeof servers !== 'object' || Array.isArray(servers)) {
      throw new Error('the config has no "mcpServers" object');
    }
    this.log = log ?? ((line) => process.stderr.write(`sandboxd-mcp: ${line}\n`));
    this.timeoutMs = timeoutMs;
    this.maxResultChars = maxResultChars;
    this.limits = limits;
    this.sandboxd = new Sandboxd(socketPath ? { socketPath } : {});
    this.downstreams = Object.entries(servers)
      .filter(([, spec]) => !spec?.disabled)
      .map(([name, spec]) => new Downstream(name, spec, {
        log: this.log,
        onToolsChanged: () => this._catalogChanged(),
      }));
    this.bindings = [];
    this.queue = Promise.resolve();
    this.promptInfo = null;
    this.server = new Server({ name: 'sandboxd-mcp', version: VERSION },
      { capabilities: { tools: { listChanged: true } } });
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [this.toolDefinition()] }));
    this.server.setRequestHandler(CallToolRequestSchema, (req, extra) => this._onCall(req, extra));
    this.server.onerror = (e) => this.log(`host connection: ${e.message}`);
  }

  /** Start the downstream servers, read prompt_info, build the catalog. */
  async start() {
    await Promise.all(this.downstreams.map((d) => d.start()));
    try {
      this.promptInfo = await this.sandboxd.promptInfo();
      this._fitTimeout(await this.sandboxd.describe());
    } catch (e) {
      this.log(`sandboxd: ${e.message} (execute_lua will fail until it is reachable)`);
    }
    this._buildCatalog();
    return this;
  }

  /** Serve the host on `transport` (a StdioServerTransport for the CLI). */
  async connect(transport) {
    await this.server.connect(transport);
  }

  /** A timeout or priority above the daemon's ceiling would fail every call: use the ceiling. */
  _fitTimeout(d) {
    const max = d?.maximums?.timeout_ms;
    if (typeof max === 'number' && typeof this.timeoutMs === 'number' && this.timeoutMs > max) {
      this.log(`timeout ${this.timeoutMs} ms is above the daemon's ceiling; using ${max} ms`);
      this.timeoutMs = max;
    }
    const order = ['low', 'normal', 'high'];
    const want = this.limits?.priority;
    const top = d?.maximums?.priority;
    if (order.includes(want) && order.includes(top) && order.indexOf(want) > order.indexOf(top)) {
      this.log(`priority ${want} is above the daemon's ceiling; using ${top}`);
      this.limits = { ...this.limits, priority: top };
    }
  }

  _buildCatalog() {
    const tables = new Set();
    this.catalog = [];
    for (const d of this.downstreams) {
      if (d.error) continue;
      const lua = luaName(d.name, tables);
      const fnNames = new Set();
      const fns = d.tools.map((t) => ({ tool: t, lua: luaName(t.name, fnNames) }));
      this.catalog.push({ downstream: d, lua, fns });
    }
  }

  _catalogChanged() {
    this._buildCatalog();
    this.server.sendToolListChanged().catch((e) => this.log(`tools/list_changed to the host: ${e.message}`));
  }

  /** The description of execute_lua: prompt_info, the rules here, the catalog. */
  description() {
    const p = this.promptInfo;
    const out = [
      'Run a Lua 5.3 chunk in sandboxd, a local sandbox, and get back what it returns. The chunk calls ' +
      'the tools of the MCP servers listed below as Lua functions, so loops, filtering and sums over ' +
      'tool results happen inside the sandbox instead of in this conversation.',
      '',
      '## Calling tools',
      '- Each MCP server is a global Lua table, each of its tools a function that takes ONE table ' +
      'argument holding the tool\'s named arguments: `server.tool({name = value})`. This overrides ' +
      'the positional form described under the sandbox rules.',
      '- A call returns one value: the tool\'s structured content when it has one, else its text ' +
      '(decoded when the text is JSON). A failing tool raises the error `server.tool: message`, ' +
      'which `pcall` catches.',
      '- Globals persist between execute_lua calls (data only: no functions); pass `reset = true` ' +
      'to start from a clean state. End with `return <value>` to get a result.',
      '',
      '## Sandbox rules',
      p ? p.constraints : '- (sandboxd was not reachable when the bridge started)',
      '',
      '## Tools',
    ];
    for (const c of this.catalog) {
      out.push('', `### ${c.lua}${c.lua === c.downstream.name ? '' : ` (MCP server "${c.downstream.name}")`}`);
      if (c.downstream.exited) out.push(`(not running: ${c.downstream.exited})`);
      if (!c.fns.length) out.push('(no tools)');
      for (const f of c.fns) {
        const mapped = f.lua === f.tool.name ? '' : ` [MCP tool "${f.tool.name}"]`;
        const desc = firstLine(f.tool.description);
        out.push(`- ${c.lua}.${f.lua}(${argSummary(f.tool.inputSchema)})${mapped}${desc ? ` -- ${desc}` : ''}`);
      }
    }
    const failed = this.downstreams.filter((d) => d.error);
    if (failed.length) {
      out.push('', '## Servers not available');
      for (const d of failed) out.push(`- ${d.name}: ${d.error}`);
    }
    return out.join('\n');
  }

  toolDefinition() {
    return {
      name: TOOL,
      title: 'Run Lua in sandboxd',
      description: this.description(),
      inputSchema: {
        type: 'object',
        properties: {
          code: { type: 'string', description: 'A Lua 5.3 chunk; end it with `return <value>`.' },
          reset: { type: 'boolean', description: 'Clear the globals kept from earlier calls first.' },
        },
        required: ['code'],
      },
      annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    };
  }

  /** The tools object for the sandboxd client: one table per server. */
  _tools(deadline, progress) {
    const tools = {};
    for (const c of this.catalog) {
      const table = { __module: c.downstream.name };
      for (const f of c.fns) {
        const label = `${c.lua}.${f.lua}`;
        table[f.lua] = async (...a) => {
          const ctx = a.pop();
          if (a.length > 1) throw new Error(`takes one table argument, got ${a.length} arguments`);
          let args = a[0];
          if (args === undefined || args === null) args = {};
          if (typeof args !== 'object') {
            throw new Error(`takes one table argument with named fields, got a ${luaType(args)}`);
          }
          if (Array.isArray(args)) {
            if (args.length) throw new Error('takes a table with named fields, not a list');
            args = {};
          }
          progress?.(label);
          const timeout = Math.max(1, deadline - Date.now());
          const r = await c.downstream.call(f.tool.name, args, { signal: ctx.signal, timeout });
          return toLuaValue(r);
        };
      }
      tools[c.lua] = table;
    }
    return tools;
  }

  _onCall(req, extra) {
    const { name, arguments: args } = req.params;
    if (name !== TOOL) {
      return { isError: true, content: [{ type: 'text', text: `unknown tool "${name}" (this server has only ${TOOL})` }] };
    }
    const run = this.queue.then(() => this._execute(args ?? {}, extra));
    this.queue = run.catch(() => {});
    return run;
  }

  async _execute(args, extra) {
    if (typeof args.code !== 'string') {
      return this._failure('invalid_params', '"code" must be a string', '');
    }
    if (args.reset !== undefined && typeof args.reset !== 'boolean') {
      return this._failure('invalid_params', '"reset" must be a boolean', '');
    }
    if (args.reset) this.bindings = [];
    const token = extra?._meta?.progressToken;
    let n = 0;
    const progress = token === undefined ? null : (label) => {
      extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: ++n, message: `calling ${label}` },
      }).catch(() => {});
    };
    try {
      const r = await this.sandboxd.execute(args.code, {
        tools: this._tools(Date.now() + this.timeoutMs, progress),
        bindings: this.bindings,
        timeoutMs: this.timeoutMs,
        limits: this.limits,
        signal: extra?.signal,
      });
      this.bindings = r.bindings;
      let text = JSON.stringify(r.value ?? null, null, 1) ?? 'null';
      if (text.length > this.maxResultChars) {
        text = `${text.slice(0, this.maxResultChars)}\n[TRUNCATED: the value has ${text.length} characters; return less]`;
      }
      if (r.output) text += `\n\nprinted:\n${r.output}`;
      if (r.bindingNames.length) text += `\n\nglobals kept: ${r.bindingNames.join(', ')}`;
      return {
        content: [{ type: 'text', text }],
        structuredContent: { value: r.value ?? null, output: r.output, binding_names: r.bindingNames },
      };
    } catch (e) {
      if (e?.kind === 'daemon_unavailable' && this.promptInfo === null) {
        // the description lacked the rules; once the daemon is back, fill them in
        Promise.all([this.sandboxd.promptInfo(), this.sandboxd.describe()]).then(([p, d]) => {
          this.promptInfo = p;
          this._fitTimeout(d);
          this._catalogChanged();
        }, () => {});
      }
      return this._failure(e?.kind ?? 'internal_error', e?.message ?? String(e), e?.output ?? '', e?.stats);
    }
  }

  _failure(kind, message, output, stats) {
    let text = `error (${kind}): ${message}`;
    if (output) text += `\n\nprinted before the error:\n${output}`;
    if (stats && typeof stats.tool_calls === 'number') text += `\n\ntool calls made: ${stats.tool_calls}`;
    text += '\n\nThe globals of the last successful call are kept.';
    return {
      isError: true,
      content: [{ type: 'text', text }],
      structuredContent: { error: { kind, message }, output },
    };
  }

  /** Stop every downstream server and the daemon connection. */
  async close() {
    await Promise.allSettled(this.downstreams.map((d) => d.close()));
    this.sandboxd.close();
    try {
      await this.server.close();
    } catch {
      // the host is already gone
    }
  }
}
