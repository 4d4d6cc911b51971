// state.js - the Lua state behind one bridge's execute_lua calls.
//
// With a daemon that has sessions (protocol 1.1), every call runs in one
// daemon session, opened at the first call with the current tool tables, so
// globals, functions, closures and metatables survive between calls.  After
// each chunk that leaves the session open, the session's data globals are
// saved (session/snapshot) as a checkpoint, when they are small enough for
// that to be cheap and to fit: the chunk's heap peak at most an eighth of
// the session's max_bindings_bytes (the ceiling's; a bigger state would be
// encoded after every call up to that bound, only to be refused).  A
// session that ends is replaced by a new one at the next call,
// started from the checkpoint, and the model is told, in the result that
// ended it or in the first result after it was found gone:
//   - a chunk that ends it (a limit, timeout, crash, cancel): that error's
//     result says the state is gone and what the next call starts from;
//   - found gone at the next call (closed after idle_timeout_ms, or the
//     daemon restarted): the chunk never ran, so it runs in a new session
//     with a note that the state was reset;
//   - the tool tables changed (a downstream tools/list_changed): the data
//     globals are carried over to a session with the new tables, with a note.
// A daemon without sessions, or with every session taken (session/open
// answers busy), is served with stateless executions and bindings (data
// globals only), as before sessions; the model is told when that starts.
//
// run() is called one at a time (the bridge's queue), with the execution's
// onOutput for live output when the host wants it; it resolves
// { ok, result | error, bindingNames, notes } and never rejects for a
// daemon error.

const SNAPSHOT_FACTOR = 8;

function ms(n) {
  return n >= 1000 && n % 1000 === 0 ? `${n / 1000} s` : `${n} ms`;
}

export class LuaState {
  /**
   * @param {object} o
   * @param {import('sandboxd').Client} o.sandboxd
   * @param {() => {tools: object, key: string}} o.tools  the current tool tables and a key that changes with them
   * @param {() => {timeoutMs: number, limits?: object, description?: object}} o.settings  description: describe's answer
   * @param {number} [o.idleTimeoutMs]  session idle_timeout_ms (default: the daemon's)
   * @param {boolean} [o.sessions=true]  false: always stateless with bindings
   */
  constructor({ sandboxd, tools, settings, idleTimeoutMs, sessions = true }) {
    this.sandboxd = sandboxd;
    this.tools = tools;
    this.settings = settings;
    this.idleTimeoutMs = idleTimeoutMs;
    this.useSessions = sessions;
    this.session = null;
    this.sessionKey = null;
    this.checkpoint = null; // { bindings, names } of the data globals
    this.lost = null; // why the last session is gone, when the model was not told yet
    this.mode = null; // 'session' | 'bindings' once a call has run
  }

  /** 'session' when the daemon has sessions (and they are wanted), else 'bindings'. */
  async kind() {
    if (!this.useSessions) return 'bindings';
    return (await this.sandboxd.features()).has('sessions') ? 'session' : 'bindings';
  }

  _idleText() {
    const d = this.settings().description;
    const idle = this.idleTimeoutMs ?? d?.daemon?.session_idle_timeout_ms;
    return typeof idle === 'number' ? ms(idle) : 'its idle timeout';
  }

  _startsFrom() {
    if (this.checkpoint && this.checkpoint.names.length) {
      return `the data globals saved after the last call (${this.checkpoint.names.join(', ')}); ` +
        'functions, closures and metatables must be defined again';
    }
    if (this.checkpoint === false) {
      return 'an empty state (the globals were too large to save between calls)';
    }
    return 'an empty state';
  }

  /**
   * The chunk that ended the session was cancelled for a host that may never
   * read its result: say at the next call that the state was reset.
   */
  ended(why) {
    if (this.session === null && this.mode === 'session') this.lost = why;
  }

  /** Forget the session (closing it on the daemon when still open). */
  async drop() {
    const s = this.session;
    this.session = null;
    this.sessionKey = null;
    if (s) await s.close().catch(() => {});
  }

  async _open(key, tools) {
    const { timeoutMs, limits, description: d } = this.settings();
    const maxBindings = d?.maximums?.max_bindings_bytes;
    const lim = { ...limits };
    if (Number.isInteger(maxBindings)) lim.max_bindings_bytes = maxBindings;
    this.maxBindings = Number.isInteger(maxBindings) ? maxBindings : d?.defaults?.max_bindings_bytes ?? 10000000;
    const opts = { tools, timeoutMs, limits: lim };
    if (this.idleTimeoutMs !== undefined) opts.idleTimeoutMs = this.idleTimeoutMs;
    if (this.checkpoint) opts.bindings = this.checkpoint.bindings;
    this.session = await this.sandboxd.session(opts);
    this.sessionKey = key;
  }

  /** Save the data globals when the chunk's heap peak says a snapshot is safe. */
  async _save(stats) {
    const peak = stats?.heap_peak_bytes;
    if (typeof peak !== 'number' || peak * SNAPSHOT_FACTOR > this.maxBindings) {
      this.checkpoint = false;
      return;
    }
    try {
      const snap = await this.session.snapshot();
      this.checkpoint = { bindings: snap.bindings, names: snap.bindingNames };
    } catch (e) {
      if (e?.data?.session_closed || e?.kind === 'session_not_found' || e?.kind === 'daemon_unavailable') {
        this.session = null;
        this.lost = 'the session ended while its globals were being saved';
      }
      this.checkpoint = false;
    }
  }

  /**
   * Run one chunk.
   * @returns {Promise<{ok: true, result: object, bindingNames: string[]|null, notes: string[]}
   *   | {ok: false, error: any, notes: string[]}>}
   */
  async run(code, { signal, reset = false, onOutput } = {}) {
    const notes = [];
    if (reset) {
      await this.drop();
      this.checkpoint = null;
      this.lost = null;
    }
    let kind;
    try {
      kind = await this.kind();
    } catch (e) {
      return this._lostConnection(e, notes);
    }
    if (kind === 'session') {
      const r = await this._runSession(code, signal, notes, onOutput);
      if (r) return r;
      // every session is taken: this call runs without one
    }
    return this._runBindings(code, signal, notes, onOutput);
  }

  _lostConnection(e, notes) {
    if (this.session) {
      this.session = null;
      this.lost = 'the connection to sandboxd was lost';
    }
    return { ok: false, error: e, notes };
  }

  async _runSession(code, signal, notes, onOutput) {
    const { tools, key } = this.tools();
    const { timeoutMs } = this.settings();
    for (let attempt = 0; ; attempt++) {
      if (this.session && this.sessionKey !== key) {
        // the tool tables changed: carry the data globals over
        await this._save({ heap_peak_bytes: 0 });
        await this.drop();
        notes.push('Note: the tool list changed, so the Lua session was reopened with the new tool tables; ' +
          `it starts from ${this._startsFrom()}.`);
      }
      if (!this.session) {
        try {
          await this._open(key, tools);
        } catch (e) {
          if (e?.kind === 'busy') {
            if (this.mode !== 'bindings') {
              notes.push('Note: every session of the daemon is in use, so this call ran without one: until one ' +
                'is free, only data globals persist between calls, not functions.');
            }
            return null;
          }
          return this._lostConnection(e, notes);
        }
        if (this.lost) {
          notes.push(`Note: the Lua state was reset before this call (${this.lost}); it starts from ${this._startsFrom()}.`);
          this.lost = null;
        }
        if (this.mode === 'bindings') {
          notes.push('Note: this call ran in a Lua session again: functions, closures and metatables now persist ' +
            'between calls too.');
        }
      }
      this.mode = 'session';
      try {
        const result = await this.session.execute(code, { signal, timeoutMs, onOutput });
        await this._save(result.stats);
        return { ok: true, result, bindingNames: this.checkpoint ? this.checkpoint.names : null, notes };
      } catch (e) {
        if (e?.kind === 'session_not_found' && attempt === 0) {
          // the chunk never ran: the session was closed while idle, or the daemon restarted
          this.session = null;
          this.lost = `the session had ended: idle for more than ${this._idleText()}, or the daemon restarted`;
          continue;
        }
        if (e?.data?.session_closed === true || e?.kind === 'session_not_found' || e?.kind === 'daemon_unavailable') {
          this.session = null;
          notes.push(`This error ended the Lua session, so its functions and globals are gone: the next call ` +
            `starts from ${this._startsFrom()}.`);
          return { ok: false, error: e, notes };
        }
        if (e?.kind === 'syntax_error') {
          notes.push('The chunk did not run; the Lua state is unchanged.');
        } else if (e?.kind === 'runtime_error') {
          await this._save(e.stats);
          notes.push('The Lua state is kept as the chunk left it (what it set before the error stays).');
        }
        return { ok: false, error: e, notes };
      }
    }
  }

  async _runBindings(code, signal, notes, onOutput) {
    const { tools } = this.tools();
    const { timeoutMs, limits } = this.settings();
    this.mode = 'bindings';
    try {
      const result = await this.sandboxd.execute(code, {
        tools,
        bindings: this.checkpoint ? this.checkpoint.bindings : [],
        timeoutMs,
        limits,
        signal,
        onOutput,
      });
      this.checkpoint = { bindings: result.bindings, names: result.bindingNames };
      return { ok: true, result, bindingNames: result.bindingNames, notes };
    } catch (e) {
      notes.push('The globals of the last successful call are kept.');
      return { ok: false, error: e, notes };
    }
  }
}
