// daemon.mjs - start the real sandboxd for a test, on a temporary socket.
//
//   const d = await startDaemon({ daemon: { max_workers: 1 } });
//   ... new Client({ socketPath: d.socketPath }) ...
//   await d.stop();                  // SIGTERM, wait, remove the directory
//
// The binary is $SANDBOXD_BIN, else build/sandboxd of this checkout.  The
// config is DEFAULTS with the given sections merged over it.  SCALE (3 under
// the ASan build, SANDBOXD_SANITIZE=1) stretches timeouts.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
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

// ASan, LeakSanitizer and UBSan reports (as tests/integration/conftest.py looks for them)
const SANITIZER = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|\.(c|h):\d+:\d+: runtime error:/;

function render(cfg) {
  return Object.entries(cfg).map(([sec, vals]) =>
    `[${sec}]\n` + Object.entries(vals).map(([k, v]) => `${k} = ${v}`).join('\n') + '\n').join('\n');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const running = new Set();
process.on('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

function canConnect(p) {
  return new Promise((resolve) => {
    const s = net.createConnection(p);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export class Daemon {
  constructor(sections = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxnode-'));
    this.socketPath = path.join(this.dir, 's.sock');
    this.configPath = path.join(this.dir, 'sandboxd.conf');
    this.logPath = path.join(this.dir, 'stderr.log');
    const cfg = structuredClone(DEFAULTS);
    for (const [sec, vals] of Object.entries(sections)) cfg[sec] = { ...(cfg[sec] ?? {}), ...vals };
    fs.writeFileSync(this.configPath, render(cfg));
    this.proc = null;
  }

  async start() {
    const log = fs.openSync(this.logPath, 'a');
    this.proc = spawn(SANDBOXD_BIN, ['-c', this.configPath, '-s', this.socketPath],
      { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    // A test that fails before stop() must not leave the run waiting on the
    // daemon: it does not hold the event loop, and dies with the test process.
    this.proc.unref();
    running.add(this.proc);
    this.proc.once('exit', () => running.delete(this.proc));
    let exited = null;
    this.proc.once('exit', (code, sig) => { exited = code ?? sig; });
    const deadline = Date.now() + 10000 * SCALE;
    while (Date.now() < deadline) {
      if (exited !== null) throw new Error(`sandboxd exited (${exited}) at start-up:\n${this.log()}`);
      if (fs.existsSync(this.socketPath) && await canConnect(this.socketPath)) return this;
      await sleep(20);
    }
    this.kill();
    throw new Error(`sandboxd did not start:\n${this.log()}`);
  }

  log() {
    try { return fs.readFileSync(this.logPath, 'utf8'); } catch { return ''; }
  }

  /** SIGKILL the daemon and its process group's children; the socket file stays. */
  kill() {
    this.proc.ref(); // hold the loop until it has exited
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGKILL');
    }
    return new Promise((r) => (this.proc.exitCode !== null || this.proc.signalCode !== null
      ? r() : this.proc.once('exit', () => r())));
  }

  /** SIGTERM, wait, remove the directory; throws on a sanitizer report in the log. */
  async stop() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.ref(); // hold the loop until it has exited
      const done = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 15000 * SCALE);
      await done;
      clearTimeout(t);
    }
    const log = this.log();
    fs.rmSync(this.dir, { recursive: true, force: true });
    const m = SANITIZER.exec(log);
    if (m) throw new Error(`sanitizer report in sandboxd's log:\n${log.slice(Math.max(0, m.index - 200), m.index + 4000)}`);
  }
}

export async function startDaemon(sections) {
  return new Daemon(sections).start();
}

/** Poll fn() until it returns truthy (returns that), or throw after ms. */
export async function until(fn, ms = 5000 * SCALE, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
