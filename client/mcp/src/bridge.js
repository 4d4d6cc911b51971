// bridge.js - sandboxd-mcp: an MCP server whose one tool runs Lua in
// sandboxd, and whose Lua calls the tools of the downstream MCP servers.
//
// Bridge.start() connects to every downstream server of the config (in
// parallel; one that fails is left out and named in the description and on
// stderr), maps server and tool names to Lua identifiers (catalog.js), and
// serves `execute_lua` ({code, reset?, interrupt?}) on the given transport.
// The Lua state lives in one daemon session per bridge, so per MCP client
// (state.js; stateless executions with bindings against a daemon without
// sessions).  Lua sees one table per server and one function per tool
// taking one table argument; each call is relayed to callTool with the
// execution's abort signal and its remaining time, and the result unwrapped
// (unwrap.js).  The `mcp` table lists the tools the description's catalog
// leaves out.  Results are rendered within --max-result-chars (render.js).
//
// Calls run one at a time in arrival order.  A call waits at most
// queueWaitMs behind a running one, then answers `busy` without running, so
// a host that abandons a call without notifications/cancelled (the AI SDK)
// does not hold later calls for the whole timeout; `interrupt: true`
// cancels the running call (and those queued before) and runs at once.
// Host cancellation (notifications/cancelled) aborts the execution.  A
// downstream tools/list_changed rebuilds the catalog and, once the host has
// initialized, tells it (notifications/tools/list_changed); before that the
// host lists the tools itself, so the change is not sent.
//
// Errors of the bridge itself go to `log` (stderr): stdout is the protocol.

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Client as Sandboxd } from 'sandboxd';
import { Downstream } from './downstream.js';
import { buildCatalog, catalogText, helperFunctions, HELPER } from './catalog.js';
import { LuaState } from './state.js';
import { renderFailure, renderSuccess, MIN_RESULT_CHARS } from './render.js';
import { toLuaValue } from './unwrap.js';

export const VERSION = '1.0.0';
const TOOL = 'execute_lua';
const INTERRUPTED = 'interrupted';

function luaType(v) {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'object') return 'table';
  return typeof v;
}

function seconds(n) {
  return `${(n / 1000).toFixed(1)} s`;
}

/**
 * The daemon's constraints without its bullet on calling tools positionally
 * (the bridge's tools take one table argument, said above them).
 */
function rules(constraints) {
  return String(constraints).split(/\n(?=- )/).filter((b) => !/^- Tools are global tables/.test(b)).join('\n');
}

/** An AbortController that follows `signal` (AbortSignal.any is not in Node 18). */
function follow(signal) {
  const c = new AbortController();
  if (signal?.aborted) c.abort(signal.reason);
  else signal?.addEventListener('abort', () => c.abort(signal.reason), { once: true });
  return c;
}

export class Bridge {
  /**
   * @param {object} opts
   * @param {object} opts.config   {mcpServers: {NAME: {command, args?, env?, cwd?, allow?, deny?}}}
   * @param {string} [opts.socketPath]  sandboxd's socket (default $SANDBOXD_SOCKET, then the system path)
   * @param {number} [opts.timeoutMs=55000] timeout_ms of each execution (below the SDK's 60 s request timeout)
   * @param {number} [opts.maxResultChars=24000] bound on a result: its text and structuredContent together (at least 400)
   * @param {number} [opts.catalogChars=3000] bound on the catalog in the description
   * @param {number} [opts.queueWaitMs=2000] how long a call waits behind a running one before answering busy
   * @param {number} [opts.idleTimeoutMs] the session's idle_timeout_ms (default: the daemon's)
   * @param {boolean} [opts.sessions=true] false: stateless executions with bindings even when the daemon has sessions
   * @param {object} [opts.limits] execute's `limits` for every execution (e.g. {priority: 'normal'})
   * @param {(line: string) => void} [opts.log] the bridge's own messages (default: stderr)
   */
  constructor({
    config, socketPath, timeoutMs = 55000, maxResultChars = 24000, catalogChars = 3000, queueWaitMs = 2000,
    idleTimeoutMs, sessions = true, limits, log,
  } = {}) {
    const servers = config?.mcpServers;
    if (!servers || typeof servers !== 'object' || Array.isArray(servers)) {
      throw new Error('the config has no "mcpServers" object');
    }
    if (!(maxResultChars >= MIN_RESULT_CHARS)) {
      throw new RangeError(`the result bound must be at least ${MIN_RESULT_CHARS} characters`);
    }
    this.log = log ?? ((line) => process.stderr.write(`sandboxd-mcp: ${line}\n`));
    this.socketPath = socketPath;
    this.timeoutMs = timeoutMs;
    this.maxResultChars = maxResultChars;
    this.catalogChars = catalogChars;
    this.queueWaitMs = queueWaitMs;
    this.limits = limits;
    this.sandboxd = new Sandboxd(socketPath ? { socketPath } : {});
    this.downstreams = Object.entries(servers)
      .filter(([, spec]) => !spec?.disabled)
      .map(([name, spec]) => new Downstream(name, spec, {
        log: this.log,
        onToolsChanged: () => this._catalogChanged(),
      }));
    this.catalog = [];
    this.promptInfo = null;
    this.daemon = null; // describe's answer
    this.ctx = null; // the running call: { deadline, progress }
    this.tail = Promise.resolve(); // settles when every call queued so far has finished or given up
    this.running = null; // { controller, startedAt }
    this.waiting = []; // queued calls, in order: { cancel(reason) }
    this.initialized = false;
    this.state = new LuaState({
      sandboxd: this.sandboxd,
      tools: () => this._tools(),
      settings: () => ({ timeoutMs: this.timeoutMs, limits: this.limits, description: this.daemon }),
      idleTimeoutMs,
      sessions,
    });
    this.server = new Server({ name: 'sandboxd-mcp', version: VERSION },
      { capabilities: { tools: { listChanged: true } } });
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [this.toolDefinition()] }));
    this.server.setRequestHandler(CallToolRequestSchema, (req, extra) => this._onCall(req, extra));
    this.server.oninitialized = () => { this.initialized = true; };
    this.server.onerror = (e) => this.log(`host connection: ${e.message}`);
  }

  /** Start the downstream servers, read prompt_info and describe, build the catalog. */
  async start() {
    await Promise.all(this.downstreams.map((d) => d.start()));
    await this._readDaemon().catch((e) => {
      this.log(`sandboxd: ${this._daemonMessage(e)} (execute_lua will fail until it is reachable)`);
    });
    this.catalog = buildCatalog(this.downstreams);
    return this;
  }

  async _readDaemon() {
    const d = await this.sandboxd.describe();
    const sessions = (await this.state.kind()) === 'session';
    this.promptInfo = await this.sandboxd.promptInfo({ session: sessions });
    this.daemon = d;
    this.sessionMode = sessions;
    this._fitTimeout(d);
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

  _catalogChanged() {
    this.catalog = buildCatalog(this.downstreams);
    // Before the host has initialized it lists the tools itself: nothing to send.
    if (!this.initialized) return;
    this.server.sendToolListChanged().catch((e) => this.log(`tools/list_changed to the host: ${e.message}`));
  }

  _stateText() {
    if (this.sessionMode === false) {
      return '- Global variables persist between execute_lua calls (data only: strings, numbers, booleans, ' +
        'tables; no functions or metatables); `local` variables do not. Pass `reset = true` to start from a ' +
        'clean state.';
    }
    const idle = this.daemon?.daemon?.session_idle_timeout_ms;
    return '- Your calls share one Lua session: globals, functions, closures and tables with metatables persist ' +
      'between execute_lua calls; `local` variables do not. If the session ends (a limit or timeout, a crash, ' +
      `${typeof idle === 'number' ? `${Math.round(idle / 1000)} s idle, ` : 'idle, '}the daemon restarting) ` +
      'the result says so and the next call starts from the data globals saved after the last call: define ' +
      'functions again. Pass `reset = true` to start from a clean state.';
  }

  /** The description of execute_lua: prompt_info, the rules here, the catalog within its budget. */
  description() {
    const p = this.promptInfo;
    const cat = catalogText(this.catalog, this.catalogChars);
    const out = [
      'Run a Lua 5.3 chunk in sandboxd, a local sandbox, and get back what it returns. The chunk calls ' +
      'the tools of the MCP servers listed below as Lua functions, so loops, filtering and sums over ' +
      'tool results happen inside the sandbox instead of in this conversation.',
      '',
      '## Calling tools',
      '- Each MCP server is a global Lua table, each of its tools a function that takes ONE table ' +
      'argument holding the tool\'s named arguments: `server.tool({name = value})`.',
      '- A call returns one value: the tool\'s structured content when it has one, else its text ' +
      '(decoded when the text is JSON). A failing tool raises the error `server.tool: message`, ' +
      'which `pcall` catches.',
      `- \`return ${HELPER}.tools()\` lists every tool (\`${HELPER}.tools("server")\` one server's), ` +
      `\`return ${HELPER}.help("server.tool")\` gives a tool's whole description and argument schema` +
      `${cat.level > 0 ? ' (the catalog below is abridged)' : ''}.`,
      this._stateText(),
      `- End with \`return <value>\` to get a result. What you get back is cut at about ` +
      `${Math.floor(this.maxResultChars / 2)} characters of value and printed output, and says so: return what ` +
      'you need, not whole documents.',
      '',
      '## Sandbox rules',
      p ? rules(p.constraints) : '- (sandboxd was not reachable when the bridge started)',
      '',
      '## Tools',
      '',
      cat.text,
    ];
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
          reset: { type: 'boolean', description: 'Start from a clean Lua state (drop what earlier calls left).' },
          interrupt: {
            type: 'boolean',
            description: 'Cancel an earlier execute_lua call that is still running (its Lua state is lost) and run this one at once.',
          },
        },
        required: ['code'],
      },
      annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    };
  }

  /** The tools object for the sandboxd client (one table per server, and `mcp`), and a key of its shape. */
  _tools() {
    const tools = {};
    const shape = [];
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
          // the current downstream server and tool of this name (the catalog may have changed)
          const now = this.catalog.find((x) => x.lua === c.lua)?.fns.find((x) => x.lua === f.lua) ?? f;
          this.ctx?.progress?.(label);
          const deadline = this.ctx?.deadline ?? Date.now() + this.timeoutMs;
          const timeout = Math.max(1, deadline - Date.now());
          const r = await c.downstream.call(now.tool.name, args, { signal: ctx.signal, timeout });
          return toLuaValue(r);
        };
      }
      tools[c.lua] = table;
      shape.push([c.lua, c.downstream.name, c.fns.map((f) => f.lua)]);
    }
    tools[HELPER] = { __module: 'sandboxd-mcp', ...helperFunctions(() => this.catalog) };
    return { tools, key: JSON.stringify(shape) };
  }

  _onCall(req, extra) {
    const { name, arguments: args } = req.params;
    if (name !== TOOL) {
      throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}" (this server has only ${TOOL})`);
    }
    return this._queued(args ?? {}, extra);
  }

  /** Cancel the running call and every call queued so far. */
  _interrupt() {
    this.running?.controller.abort(INTERRUPTED);
    for (const w of this.waiting.splice(0)) w.cancel();
  }

  async _queued(args, extra) {
    const bad = this._badArgs(args);
    if (bad) return renderFailure({ kind: 'invalid_params', message: bad }, this.maxResultChars);
    if (args.interrupt) this._interrupt();
    const prev = this.tail;
    let done;
    const mine = new Promise((r) => { done = r; });
    this.tail = prev.then(() => mine);
    const arrived = Date.now();
    let cancel;
    const waiter = { cancel: () => cancel('cancelled') };
    this.waiting.push(waiter);
    let timer;
    const wait = this.queueWaitMs + (args.interrupt ? 10000 : 0);
    const turn = await Promise.race([
      prev.then(() => 'turn'),
      new Promise((r) => { cancel = r; }),
      new Promise((r) => { timer = setTimeout(() => r('timeout'), wait); }),
    ]);
    clearTimeout(timer);
    const i = this.waiting.indexOf(waiter);
    if (i >= 0) this.waiting.splice(i, 1);
    if (turn !== 'turn') {
      done();
      if (turn === 'cancelled') {
        return renderFailure({
          kind: 'cancelled',
          message: 'not run: a later execute_lua call asked to interrupt the calls before it',
        }, this.maxResultChars);
      }
      const age = this.running ? Date.now() - this.running.startedAt : null;
      return renderFailure({
        kind: 'busy',
        message: `not run: ${age === null ? 'earlier execute_lua calls are still queued'
          : `an earlier execute_lua call has been running for ${seconds(age)}`} and this one waited ` +
          `${seconds(Date.now() - arrived)} (calls run one at a time). If that call was abandoned (an agent ` +
          'stopped by its user), call again with ' +
          '`interrupt = true`: it cancels that call (its Lua state is lost) and runs this code at once. ' +
          'Otherwise call again once it has finished.',
        extra: age === null ? undefined : { running_ms: age },
      }, this.maxResultChars);
    }
    try {
      return await this._execute(args, extra);
    } finally {
      done();
    }
  }

  _badArgs(args) {
    if (typeof args.code !== 'string') return '"code" must be a string';
    for (const k of ['reset', 'interrupt']) {
      if (args[k] !== undefined && typeof args[k] !== 'boolean') return `"${k}" must be a boolean`;
    }
    return null;
  }

  /** The client's no-daemon message, with the bridge's own option. */
  _daemonMessage(e) {
    const m = String(e?.message ?? e);
    if (e?.kind === 'daemon_unavailable' && /cannot connect/.test(m)) {
      return `${m.replace(/ \(no such socket:.*\)$/, '')}: is sandboxd running? Start it, or give sandboxd-mcp ` +
        'its socket with --socket PATH.';
    }
    return m;
  }

  async _execute(args, extra) {
    const token = extra?._meta?.progressToken;
    let n = 0;
    const progress = token === undefined ? null : (label) => {
      extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: ++n, message: `calling ${label}` },
      }).catch(() => {});
    };
    const controller = follow(extra?.signal);
    this.running = { controller, startedAt: Date.now() };
    this.ctx = { deadline: Date.now() + this.timeoutMs, progress };
    let out;
    try {
      out = await this.state.run(args.code, { signal: controller.signal, reset: args.reset === true });
    } finally {
      this.running = null;
      this.ctx = null;
    }
    if (out.ok) {
      const r = out.result;
      return renderSuccess({
        value: r.value,
        output: r.output,
        outputTruncated: r.outputTruncated,
        bindingNames: out.bindingNames,
        notes: out.notes,
      }, this.maxResultChars);
    }
    const e = out.error;
    if (e?.kind === 'daemon_unavailable' && this.promptInfo === null) {
      // the description lacked the rules; once the daemon is back, fill them in
      this._readDaemon().then(() => this._catalogChanged(), () => {});
    }
    let message = this._daemonMessage(e);
    if (e?.kind === 'cancelled' && controller.signal.aborted) {
      const interrupted = controller.signal.reason === INTERRUPTED;
      if (interrupted) message = 'cancelled by a later execute_lua call with interrupt = true';
      // this result may reach no model (its host gave up on it, or cancelled it
      // and ignores the answer): the next call says the state was reset
      this.state.ended(interrupted ? 'the call before this one was interrupted, which ended the Lua session'
        : 'the host cancelled the call before this one, which ended the Lua session');
    }
    return renderFailure({
      kind: e?.kind ?? 'internal_error',
      message,
      output: e?.output ?? '',
      outputTruncated: e?.outputTruncated === true,
      stats: e?.stats,
      notes: out.notes,
    }, this.maxResultChars);
  }

  /** Stop every downstream server, the session and the daemon connection. */
  async close() {
    await Promise.allSettled([...this.downstreams.map((d) => d.close()), this.state.drop()]);
    this.sandboxd.close();
    try {
      await this.server.close();
    } catch {
      // the host is already gone
    }
  }
}
