// daemon.mjs - start the real sandboxd for a test, on a temporary socket.
//
//   const d = await startDaemon({ daemon: { max_workers: 1 } });
//   ... new Client({ socketPath: d.socketPath }) ...
//   await d.stop();                  // SIGTERM, wait, remove the directory
//
// The daemon is started by tests/launch.py, the launcher every suite shares
// (docs/hacking.md, "Starting a daemon in a test"), run as a program: it
// writes the config (DEFAULTS with the given sections merged over it), waits
// for the daemon's READY=1, and on `stop` (or when this process goes away and
// its stdin closes) stops it by SIGTERM and reports any sanitizer report in
// its log.  The binary is $SANDBOXD_BIN, else build/sandboxd of this
// checkout.  SCALE (3 under the ASan build, SANDBOXD_SANITIZE=1) stretches
// timeouts.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const LAUNCH = path.join(REPO, 'tests', 'launch.py');
const PYTHON = '/usr/bin/python3';
export const SANDBOXD_BIN = process.env.SANDBOXD_BIN || path.join(REPO, 'build', 'sandboxd');
export const SCALE = process.env.SANDBOXD_SANITIZE === '1' ? 3 : 1;

export const DEFAULTS = {
  daemon: {
    max_workers: 8,
    max_queue: 64,
    pool_size: 0,
    max_message_bytes: 1048576,
    log_level: 'info',
    shutdown_grace_ms: 200,
  },
  defaults: { timeout_ms: 10000 * SCALE },
  ceilings: { timeout_ms: 120000 * SCALE },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Daemon {
  constructor(sections = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxnode-'));
    this.socketPath = path.join(this.dir, 's.sock');
    this.logPath = path.join(this.dir, 'stderr.log');
    const cfg = structuredClone(DEFAULTS);
    for (const [sec, vals] of Object.entries(sections)) cfg[sec] = { ...(cfg[sec] ?? {}), ...vals };
    this.args = [LAUNCH, '--bin', SANDBOXD_BIN, '--socket', this.socketPath, '--log', this.logPath];
    for (const [sec, vals] of Object.entries(cfg)) {
      for (const [k, v] of Object.entries(vals)) this.args.push('--set', `${sec}.${k}=${v}`);
    }
    this.launcher = null;
  }

  /** Start the daemon (again, after kill()); resolves once it is ready. */
  async start() {
    if (!this.launcher) this.#spawn();
    else this.launcher.stdin.write('start\n');
    const line = await this.#reply();
    if (!line.startsWith('ready ')) {
      throw new Error(`sandboxd did not start (${line}):\n${this.log() || this.errors}`);
    }
    return this;
  }

  #spawn() {
    const child = spawn(PYTHON, this.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.launcher = child;
    this.lines = [];
    this.waiting = null;
    this.errors = '';
    this.closed = false;              // exited, and its output all read
    this.exited = new Promise((r) => child.once('close', () => { this.closed = true; r(); }));
    let buf = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (s) => {
      buf += s;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        this.lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
      this.waiting?.();
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s) => { this.errors += s; });
    child.once('close', () => this.waiting?.());
    child.stdin.on('error', () => {});       // a launcher that has exited: its answer says why
  }

  // The launcher's next line, or `exited` when it ended first.  The launcher
  // holds the event loop only while a test waits for it: a test that fails
  // before stop() does not leave the run waiting, and the launcher stops the
  // daemon when this process goes away (its stdin closes).
  async #reply() {
    this.#hold(true);
    try {
      for (;;) {
        if (this.lines.length) return this.lines.shift();
        if (this.closed) return 'exited';
        await new Promise((r) => { this.waiting = r; });
        this.waiting = null;
      }
    } finally {
      this.#hold(false);
    }
  }

  #hold(on) {
    const c = this.launcher;
    for (const h of [c, c.stdin, c.stdout, c.stderr]) on ? h.ref() : h.unref();
  }

  log() {
    try { return fs.readFileSync(this.logPath, 'utf8'); } catch { return ''; }
  }

  /** SIGKILL the daemon (and its process group); the socket file stays. */
  async kill() {
    if (!this.launcher) return;
    this.launcher.stdin.write('kill\n');
    const line = await this.#reply();
    if (line !== 'killed') throw new Error(`the launcher answered ${line}:\n${this.errors}`);
  }

  /** SIGTERM, wait, remove the directory; throws on a sanitizer report in the log. */
  async stop() {
    let report = [];
    if (this.launcher) {
      this.#hold(true);
      this.launcher.stdin.end('stop\n');
      await this.exited;
      this.launcher = null;
      report = this.lines.filter((l) => l.startsWith('report ')).map((l) => l.slice(7));
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
    if (report.length) throw new Error(`sanitizer report in sandboxd's log:\n${report.join('\n')}`);
  }
}

export async function startDaemon(sections) {
  return new Daemon(sections).start();
}

/** Poll fn() until it returns truthy (returns that), or throw after ms.
 *  The wait ends as soon as fn() holds; ms is only a safety net against a
 *  hang, a minute by default, since a loaded machine can take seconds. */
export async function until(fn, ms = 60000 * SCALE, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
