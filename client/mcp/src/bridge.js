// bridge.js - sandboxd-mcp: an MCP server whose one tool runs Lua in
// sandboxd, and whose Lua calls the tools of the downstream MCP servers.
//
// A Bridge is what its MCP hosts share: the downstream servers of the config
// (connected in parallel at start(); one that fails is left out and named in
// the description and on stderr), the catalog mapping their names to Lua
// identifiers (catalog.js), the daemon's description and the options.
// connect(transport) serves one MCP host on a transport and returns its
// HostSession: stdio serves one, Streamable HTTP (http.js) one per MCP
// session.  Each HostSession has its own SDK Server and its own Lua state, one
// daemon session (state.js; stateless executions with bindings against a
// daemon without sessions), ended with it.
//
// Lua sees one table per server and one function per tool taking one table
// argument; each call is relayed to callTool with the execution's abort
// signal and its remaining time, and the result unwrapped (unwrap.js).  A
// call the confirmation policy covers (confirm.js) first asks the host's user
// through elicitation/create; a refusal is a Lua error.  The `mcp` table lists
// the tools the description's catalog leaves out.  Results are rendered
// within --max-result-chars (render.js) and described by OUTPUT_SCHEMA.
//
// Calls of one host run one at a time in arrival order.  A call waits at most
// queueWaitMs behind a running one, then answers `busy` without running, so a
// host that abandons a call without notifications/cancelled (the AI SDK)
// does not hold later calls for the whole timeout; `interrupt: true` cancels
// the running call (and those queued before) and runs at once.  Host
// cancellation (notifications/cancelled) aborts the execution.  A host whose
// request carries a progress token gets notifications/progress for each
// downstream call and for what the chunk prints (rate-limited, bounded).  A
// downstream tools/list_changed rebuilds the catalog and tells every host
// that has initialized (before that a host lists the tools itself).
//
// Errors of the bridge itself go to `log` (stderr): stdout may be the protocol.

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Client as Sandboxd } from 'sandboxd';
import { Downstream, resolveSpec, CONFIRM } from './downstream.js';
import { buildCatalog, catalogText, helperFunctions, HELPER } from './catalog.js';
import { confirmReason, askText, refusal } from './confirm.js';
import { LuaState } from './state.js';
import { renderFailure, renderSuccess, MIN_RESULT_CHARS, OUTPUT_SCHEMA } from './render.js';
import { toLuaValue } from './unwrap.js';

export const VERSION = '1.0.0';
const TOOL = 'execute_lua';
const INTERRUPTED = 'interrupted';
export const UNCONFIRMED = ['refuse', 'allow'];

// Live output as progress: at most one notification per PROGRESS_MS, each
// with at most PROGRESS_CHARS of new output, at most PROGRESS_TOTAL in all.
const PROGRESS_MS = 250;
const PROGRESS_CHARS = 2000;
const PROGRESS_TOTAL = 64 * 1024;

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
   * @param {object} opts.config   {mcpServers: {NAME: {command, args?, env?, cwd?} | {url, headers?, type?},
   *                               with allow?, deny?, confirm?}}
   * @param {string} [opts.socketPath]  sandboxd's socket (default $SANDBOXD_SOCKET, then the system path)
   * @param {number} [opts.timeoutMs=55000] timeout_ms of each execution (below the SDK's 60 s request timeout)
   * @param {number} [opts.maxResultChars=24000] bound on a result: its text and structuredContent together (at least 400)
   * @param {number} [opts.catalogChars=3000] bound on the catalog in the description
   * @param {number} [opts.queueWaitMs=2000] how long a call waits behind a running one before answering busy
   * @param {number} [opts.idleTimeoutMs] the session's idle_timeout_ms (default: the daemon's)
   * @param {boolean} [opts.sessions=true] false: stateless executions with bindings even when the daemon has sessions
   * @param {object} [opts.limits] execute's `limits` for every execution (e.g. {priority: 'normal'})
   * @param {string} [opts.confirm='none'] which downstream calls ask the user first: destructive, all, none
   *                               (a server's "confirm" overrides it)
   * @param {string} [opts.withoutElicitation='refuse'] such a call when the host cannot ask: refuse, allow
   * @param {object} [opts.env=process.env] where `${NAME}` in the config is looked up
   * @param {(line: string) => void} [opts.log] the bridge's own messages (default: stderr)
   */
  constructor({
    config, socketPath, timeoutMs = 55000, maxResultChars = 24000, catalogChars = 3000, queueWaitMs = 2000,
    idleTimeoutMs, sessions = true, limits, confirm = 'none', withoutElicitation = 'refuse', env = process.env, log,
  } = {}) {
    const servers = config?.mcpServers;
    if (!servers || typeof servers !== 'object' || Array.isArray(servers)) {
      throw new Error('the config has no "mcpServers" object');
    }
    if (!(maxResultChars >= MIN_RESULT_CHARS)) {
      throw new RangeError(`the result bound must be at least ${MIN_RESULT_CHARS} characters`);
    }
    if (!CONFIRM.includes(confirm)) throw new RangeError(`confirm takes ${CONFIRM.join(', ')}, not "${confirm}"`);
    if (!UNCONFIRMED.includes(withoutElicitation)) {
      throw new RangeError(`withoutElicitation takes ${UNCONFIRMED.join(', ')}, not "${withoutElicitation}"`);
    }
    this.log = log ?? ((line) => process.stderr.write(`sandboxd-mcp: ${line}\n`));
    this.socketPath = socketPath;
    this.timeoutMs = timeoutMs;
    this.maxResultChars = maxResultChars;
    this.catalogChars = catalogChars;
    this.queueWaitMs = queueWaitMs;
    this.idleTimeoutMs = idleTimeoutMs;
    this.sessions = sessions;
    this.limits = limits;
    this.confirm = confirm;
    this.withoutElicitation = withoutElicitation;
    const specs = Object.entries(servers).filter(([, spec]) => !spec?.disabled).map(([name, spec]) => {
      try {
        return [name, resolveSpec(spec, env)];
      } catch (e) {
        throw new Error(`server "${name}": ${e.message}`);
      }
    });
    this.sandboxd = new Sandboxd(socketPath ? { socketPath } : {});
    this.downstreams = specs.map(([name, spec]) => new Downstream(name, spec, {
      log: this.log,
      onToolsChanged: () => this._catalogChanged(),
    }));
    this.catalog = [];
    this.promptInfo = null;
    this.daemon = null; // describe's answer
    this.sessionMode = undefined;
    this.hosts = new Set(); // the HostSessions being served
  }

  /** Start the downstream servers, read prompt_info and describe, build the catalog. */
  async start() {
    await Promise.all(this.downstreams.map((d) => d.start()));
    await this._readDaemon().catch((e) => {
      this.log(`sandboxd: ${this._daemonMessage(e)} (execute_lua will fail until it is reachable)`);
    });
    this.catalog = buildCatalog(this.downstreams, (d, t) => this.confirmReason(d, t));
    return this;
  }

  async _readDaemon() {
    const d = await this.sandboxd.describe();
    const features = await this.sandboxd.features();
    const sessions = this.sessions && features.has('sessions');
    this.promptInfo = await this.sandboxd.promptInfo({ session: sessions });
    this.daemon = d;
    this.sessionMode = sessions;
    this._fitTimeout(d);
  }

  /** Serve one MCP host on `transport`; resolves its HostSession. */
  async connect(transport) {
    const h = new HostSession(this);
    this.hosts.add(h);
    await h.connect(transport);
    return h;
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

  /** Why a call of `tool` on downstream `d` needs the user's confirmation, or null. */
  confirmReason(d, tool) {
    return confirmReason(d.spec.confirm ?? this.confirm, tool, d.spec.confirm !== undefined);
  }

  _catalogChanged() {
    this.catalog = buildCatalog(this.downstreams, (d, t) => this.confirmReason(d, t));
    for (const h of this.hosts) h.toolsChanged();
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

  _marksText() {
    const asks = this.catalog.some((c) => c.fns.some((f) => f.confirm));
    const marked = this.catalog.some((c) => c.fns.some((f) => f.tool.annotations));
    if (!asks && !marked) return [];
    const out = [];
    if (marked) {
      out.push('- Marks in [brackets] after a tool are its server\'s own hints: read-only, destructive, ' +
        'idempotent, open-world (it reaches outside systems).');
    }
    if (asks) {
      out.push('- A tool marked `asks the user` runs only once the user accepts the call; declined, cancelled ' +
        'or not askable, it raises `server.tool: not run: ...` (pcall catches it): do not retry that call, ' +
        'tell the user instead.');
    }
    return out;
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
      ...this._marksText(),
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
      outputSchema: OUTPUT_SCHEMA,
      annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    };
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

  /** Stop serving every host, stop every downstream server, close the daemon connection. */
  async close() {
    await Promise.allSettled([...this.hosts].map((h) => h.close()));
    await Promise.allSettled(this.downstreams.map((d) => d.close()));
    this.sandboxd.close();
  }
}

/** One MCP host: its SDK Server, its Lua state, its queue of calls. */
export class HostSession {
  constructor(bridge) {
    this.bridge = bridge;
    this.ctx = null; // the running call: { deadline, progress, extra, notes }
    this.tail = Promise.resolve(); // settles when every call queued so far has finished or given up
    this.running = null; // { controller, startedAt }
    this.waiting = []; // queued calls, in order: { cancel(reason) }
    this.initialized = false;
    this.closed = false;
    this.onclose = null;
    this.state = new LuaState({
      sandboxd: bridge.sandboxd,
      tools: () => this._tools(),
      settings: () => ({ timeoutMs: bridge.timeoutMs, limits: bridge.limits, description: bridge.daemon }),
      idleTimeoutMs: bridge.idleTimeoutMs,
      sessions: bridge.sessions,
    });
    this.server = new Server({ name: 'sandboxd-mcp', version: VERSION },
      { capabilities: { tools: { listChanged: true } } });
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [bridge.toolDefinition()] }));
    this.server.setRequestHandler(CallToolRequestSchema, (req, extra) => this._onCall(req, extra));
    this.server.oninitialized = () => { this.initialized = true; };
    this.server.onerror = (e) => bridge.log(`host connection: ${e.message}`);
    this.server.onclose = () => { this.close(); };
  }

  async connect(transport) {
    await this.server.connect(transport);
  }

  toolsChanged() {
    // Before the host has initialized it lists the tools itself: nothing to send.
    if (!this.initialized || this.closed) return;
    this.server.sendToolListChanged().catch((e) => this.bridge.log(`tools/list_changed to the host: ${e.message}`));
  }

  /** End this host's calls and its Lua state (the daemon session is closed). */
  async close() {
    if (this.closed) return;
    this.closed = true;
    this.bridge.hosts.delete(this);
    this._interrupt();
    await this.state.drop();
    try {
      await this.server.close();
    } catch {
      // the host is already gone
    }
    this.onclose?.();
  }

  /** The tools object for the sandboxd client (one table per server, and `mcp`), and a key of its shape. */
  _tools() {
    const tools = {};
    const shape = [];
    for (const c of this.bridge.catalog) {
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
          const now = this.bridge.catalog.find((x) => x.lua === c.lua)?.fns.find((x) => x.lua === f.lua) ?? f;
          const deadline = this.ctx?.deadline ?? Date.now() + this.bridge.timeoutMs;
          if (now.confirm) await this._confirm(label, c.downstream.name, now, args, ctx.signal, deadline);
          this.ctx?.progress?.(`calling ${label}`);
          const timeout = Math.max(1, deadline - Date.now());
          const r = await c.downstream.call(now.tool.name, args, { signal: ctx.signal, timeout });
          return toLuaValue(r);
        };
      }
      tools[c.lua] = table;
      shape.push([c.lua, c.downstream.name, c.fns.map((f) => f.lua)]);
    }
    tools[HELPER] = { __module: 'sandboxd-mcp', ...helperFunctions(() => this.bridge.catalog) };
    return { tools, key: JSON.stringify(shape) };
  }

  /**
   * Ask the host's user before a call the policy covers; resolves when the
   * call may run, throws the Lua error otherwise (elicitation/create bounded
   * by the chunk's time and cancelled with it).
   */
  async _confirm(label, server, f, args, signal, deadline) {
    const why = f.confirm;
    const form = this.server.getClientCapabilities()?.elicitation?.form;
    if (!form) {
      if (this.bridge.withoutElicitation === 'allow') {
        this.ctx?.notes.add(`Note: ${label} ran without the user's confirmation (${why}): this MCP host cannot ` +
          'ask its user, and the bridge is set to allow such calls.');
        return;
      }
      throw new Error(refusal('refused', why));
    }
    const extra = this.ctx?.extra;
    let r;
    try {
      r = await this.server.elicitInput({
        mode: 'form',
        message: askText(label, server, f.tool.name, args, why),
        requestedSchema: { type: 'object', properties: {} },
      }, {
        // the chunk's own timeout ends the wait (its signal aborts this request): the SDK's
        // timeout is only a backstop past it
        relatedRequestId: extra?.requestId, signal, timeout: Math.max(1, deadline - Date.now()) + 5000,
      });
    } catch (e) {
      throw new Error(refusal('failed', why, e?.message ?? String(e)));
    }
    if (r.action === 'accept') return;
    throw new Error(refusal(r.action === 'decline' ? 'declined' : 'cancelled', why));
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
    const max = this.bridge.maxResultChars;
    const bad = this._badArgs(args);
    if (bad) return renderFailure({ kind: 'invalid_params', message: bad }, max);
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
    const wait = this.bridge.queueWaitMs + (args.interrupt ? 10000 : 0);
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
        }, max);
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
      }, max);
    }
    try {
      if (this.closed) return renderFailure({ kind: 'cancelled', message: 'not run: the MCP session ended' }, max);
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

  /**
   * notifications/progress for the request's token, when it has one: one per
   * downstream call, and the chunk's printed output, at most one notification
   * per PROGRESS_MS with at most PROGRESS_CHARS of new output and
   * PROGRESS_TOTAL in all.  stop() ends them before the answer is sent.
   */
  _progress(extra, streaming) {
    const token = extra?._meta?.progressToken;
    if (token === undefined) return { call: null, output: undefined, stop: () => {} };
    let n = 0;
    let stopped = false;
    const send = (message) => {
      if (stopped) return;
      extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: ++n, message },
      }).catch(() => {});
    };
    let pending = '';
    let dropped = 0; // chars of pending output dropped before they were sent
    let sent = 0;
    let last = 0;
    let timer = null;
    const flush = () => {
      timer = null;
      if (!pending || stopped || sent >= PROGRESS_TOTAL) return;
      const room = Math.min(PROGRESS_CHARS, PROGRESS_TOTAL - sent);
      const text = pending.slice(-room);
      const hidden = dropped + pending.length - text.length;
      pending = '';
      dropped = 0;
      sent += text.length;
      last = Date.now();
      send(`${hidden ? `printed (${hidden.toLocaleString('en-US')} chars before this not shown)` : 'printed'}:\n${text}`);
      if (sent >= PROGRESS_TOTAL) send('printed: more than the progress bound; the rest is in the result');
    };
    const output = !streaming ? undefined : (text) => {
      if (stopped || sent >= PROGRESS_TOTAL) return;
      pending += text;
      if (pending.length > 2 * PROGRESS_CHARS) {
        dropped += pending.length - PROGRESS_CHARS;
        pending = pending.slice(-PROGRESS_CHARS);
      }
      if (!timer) timer = setTimeout(flush, Math.max(0, last + PROGRESS_MS - Date.now()));
    };
    return {
      call: (message) => {
        clearTimeout(timer);
        flush();
        send(message);
      },
      output,
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  async _execute(args, extra) {
    const b = this.bridge;
    const streaming = extra?._meta?.progressToken !== undefined &&
      (await b.sandboxd.features().catch(() => new Set())).has('stream_output');
    const progress = this._progress(extra, streaming);
    const controller = follow(extra?.signal);
    this.running = { controller, startedAt: Date.now() };
    const notes = new Set();
    this.ctx = { deadline: Date.now() + b.timeoutMs, progress: progress.call, extra, notes };
    let out;
    try {
      out = await this.state.run(args.code, {
        signal: controller.signal, reset: args.reset === true, onOutput: progress.output,
      });
    } finally {
      progress.stop();
      this.running = null;
      this.ctx = null;
    }
    const allNotes = [...out.notes, ...notes];
    if (out.ok) {
      const r = out.result;
      return renderSuccess({
        value: r.value,
        output: r.output,
        outputTruncated: r.outputTruncated,
        bindingNames: out.bindingNames,
        notes: allNotes,
      }, b.maxResultChars);
    }
    const e = out.error;
    if (e?.kind === 'daemon_unavailable' && b.promptInfo === null) {
      // the description lacked the rules; once the daemon is back, fill them in
      b._readDaemon().then(() => b._catalogChanged(), () => {});
    }
    let message = b._daemonMessage(e);
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
      notes: allNotes,
    }, b.maxResultChars);
  }
}
