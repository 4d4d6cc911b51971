#!/usr/bin/env node
// bench/node_tools.mjs - the Node client and the MCP bridge against their
// baselines, measured in the same run on the same daemon.
//
//   node bench/node_tools.mjs [--sandboxd PATH] [--smoke]
//
// 1. Tool calls per second inside one execution: the Node client (package
//    sandboxd, a sync tool) against the C load generator (bench/loadgen
//    tools), in rounds of C then Node; the median of the per-round ratios.
//    Target >= 0.70.
// 2. Latency an execute_lua call with one downstream call adds over the two
//    MCP round trips it contains: host -> bridge tools/call (the bridge's
//    JSON-RPC error for an unknown tool: no Lua) plus host -> the same downstream
//    server tools/call directly.  p50s compared.  Target <= 2 ms.
//
// Needs build/sandboxd, bench/loadgen (make -C bench loadgen) and
// client/mcp/node_modules (npm ci there).  Prints a table; the exit status
// is 0 whenever every scenario ran (benchmarks report, they do not assert).
// --smoke: tiny counts, figures mean nothing.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client as Sandboxd } from '../client/node/src/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const argv = process.argv.slice(2);
const smoke = argv.includes('--smoke');
const bin = argv.includes('--sandboxd') ? path.resolve(argv[argv.indexOf('--sandboxd') + 1])
  : path.join(REPO, 'build', 'sandboxd');
const LOADGEN = path.join(HERE, 'loadgen');
const MCP = path.join(REPO, 'client', 'mcp');
const SDK = path.join(MCP, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const TOY = path.join(MCP, 'test', 'fixtures', 'toy-server.mjs');

const N = smoke ? { calls: 200, rounds: 1, mcp: 20, warm: 5 } : { calls: 20000, rounds: 5, mcp: 400, warm: 50 };

for (const [what, p] of [['sandboxd', bin], ['bench/loadgen (make -C bench loadgen)', LOADGEN],
  ['client/mcp/node_modules (npm ci in client/mcp)', SDK]]) {
  if (!fs.existsSync(p)) {
    console.error(`bench/node_tools: ${what} is missing: ${p}`);
    process.exit(1);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };

// ---- the daemon (as bench/run configures it)
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxnodebench-'));
const sock = path.join(tmp, 's.sock');
const conf = path.join(tmp, 'bench.conf');
const lines = ['[daemon]', 'max_workers = 8', 'pool_size = 8', 'max_queue = 4096', 'log_level = warning',
  'shutdown_grace_ms = 1000', '[ceilings]', 'timeout_ms = 600000'];
if (process.getuid() === 0) {
  const empty = path.join(tmp, 'empty');
  fs.mkdirSync(empty, { mode: 0o555 });
  fs.chmodSync(tmp, 0o755);
  lines.push('[worker]', 'user = nobody', 'group = nogroup', `chroot = ${empty}`);
}
fs.writeFileSync(conf, `${lines.join('\n')}\n`);
const daemon = spawn(bin, ['-c', conf, '-s', sock], { stdio: ['ignore', 'ignore', 'inherit'] });
const sbx = new Sandboxd({ socketPath: sock });
let rows = [];
const load0 = os.loadavg()[0];
try {
  for (let i = 0; ; i++) {
    try { await sbx.ping(); break; } catch (e) { if (i > 500) throw e; await sleep(20); }
  }
  const waitPool = async () => {
    for (let i = 0; i < 250; i++) {
      if ((await sbx.describe()).state.idle_workers >= 8) return;
      await sleep(20);
    }
  };

  // ---- 1. tool calls per second
  const code = `local s = 0 for i = 1, ${N.calls} do s = s + T.f(i) end return s`;
  const tools = { T: { f: () => 1 } };
  const nodeRates = [];
  const cRates = [];
  const nodeCpu = [];
  await sbx.execute(`local s = 0 for i = 1, ${Math.min(N.calls, 2000)} do s = s + T.f(i) end return s`,
    { tools, timeoutMs: 600000 }); // warm the JIT
  for (let r = 0; r < N.rounds; r++) {
    await waitPool();
    const out = execFileSync(LOADGEN, ['tools', '-s', sock, '-n', String(N.calls)], { encoding: 'utf8' });
    cRates.push(Number(/^rate=([\d.]+)/m.exec(out)[1]));
    await waitPool();
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    const res = await sbx.execute(code, { tools, timeoutMs: 600000 });
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    nodeCpu.push((cpu.user + cpu.system) / N.calls);
    if (res.value !== N.calls) throw new Error(`node tool scenario: value ${res.value}`);
    nodeRates.push(N.calls / s);
  }
  // each Node round against the C round just before it (the load on this
  // machine drifts between rounds), the median of those ratios
  const nodeRate = median(nodeRates);
  const cRate = median(cRates);
  const ratio = median(nodeRates.map((x, i) => x / cRates[i]));
  rows.push(['tool calls in one execution', `${nodeRate.toFixed(0)}/s (Node client)`,
    'C loadgen, same daemon', `${cRate.toFixed(0)}/s`, `${ratio.toFixed(2)}x`, '>= 0.70x', ratio >= 0.70]);
  const notes = [`tool call rounds (calls/s, C then Node): ${cRates.map((x, i) =>
    `${x.toFixed(0)}/${nodeRates[i].toFixed(0)}`).join(' ')}; ratio = median of the per-round ratios`,
    `CPU of the Node process per tool call (its own cost, whatever the load): ${median(nodeCpu).toFixed(1)} us`];

  // ---- 2. execute_lua with one downstream call versus its two MCP round trips
  const { Client } = await import(pathToFileURL(path.join(SDK, 'client', 'index.js')).href);
  const { StdioClientTransport } = await import(pathToFileURL(path.join(SDK, 'client', 'stdio.js')).href);
  const cfg = path.join(tmp, 'servers.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: { toy: { command: process.execPath, args: [TOY, 'bench'] } } }));
  const connect = async (command, args) => {
    const c = new Client({ name: 'bench-host', version: '1' });
    await c.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
    return c;
  };
  const time = async (fn) => { const t0 = process.hrtime.bigint(); await fn(); return Number(process.hrtime.bigint() - t0) / 1e3; };
  const direct = await connect(process.execPath, [TOY, 'bench-direct']);
  // the bridge at the daemon's default priority (low: nice 10), and at high
  // (nice 0, as the host and the downstream server run)
  for (const [label, extra] of [['', []], ['  same, --priority high', ['--priority', 'high']]]) {
    const viaBridge = await connect(process.execPath,
      [path.join(MCP, 'bin', 'sandboxd-mcp.js'), '--config', cfg, '--socket', sock, ...extra]);
    const lua = () => viaBridge.callTool({ name: 'execute_lua', arguments: { code: 'return toy.pid().pid' } });
    const bridgeRt = () => viaBridge.callTool({ name: 'nope', arguments: {} }).catch(() => null);
    const directRt = () => direct.callTool({ name: 'pid', arguments: {} });
    for (let i = 0; i < N.warm; i++) { await lua(); await bridgeRt(); await directRt(); }
    const tl = [];
    const tb = [];
    const td = [];
    const tx = [];
    const limits = extra.length ? { priority: 'high' } : undefined;
    const plain = () => sbx.execute('return T.f()', { tools: { T: { f: () => 1 } }, limits });
    for (let i = 0; i < N.mcp; i++) { // interleaved, so drift hits all alike
      tl.push(await time(lua));
      tb.push(await time(bridgeRt));
      td.push(await time(directRt));
      tx.push(await time(plain));
    }
    const r = await lua();
    if (r.isError) throw new Error(`execute_lua failed: ${r.content[0].text}`);
    const base = median(tb) + median(td);
    const added = median(tl) - base;
    rows.push([label || 'execute_lua + 1 downstream call, p50', `${(median(tl) / 1000).toFixed(2)} ms`,
      '2 MCP round trips (bridge + downstream)', `${(base / 1000).toFixed(2)} ms`,
      `+${(added / 1000).toFixed(2)} ms`, '<= +2 ms', added <= 2000]);
    notes.push(`${label ? 'priority high' : 'default priority'}: MCP round trips p50: host->bridge tools/call ` +
      `${(median(tb) / 1000).toFixed(2)} ms, host->downstream tools/call ${(median(td) / 1000).toFixed(2)} ms; ` +
      `p99 execute_lua ${(pct(tl, 0.99) / 1000).toFixed(2)} ms, the two round trips ` +
      `${((pct(tb, 0.99) + pct(td, 0.99)) / 1000).toFixed(2)} ms; of the added time, a sandboxd execute ` +
      `with one tool call (Node client, no MCP) takes ${(median(tx) / 1000).toFixed(2)} ms p50, the bridge ` +
      `itself the other ${((added - median(tx)) / 1000).toFixed(2)} ms`);
    await viaBridge.close();
  }
  await direct.close();

  // ---- the table
  const head = ['scenario', 'measured', 'baseline', 'baseline figure', 'ratio', 'target', 'met?'];
  rows = rows.map((x) => x.map((c, i) => (i === 6 ? (c === null ? '' : c ? 'yes' : 'NO') : String(c))));
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i].length)));
  const fmt = (x) => x.map((c, i) => c.padEnd(w[i])).join('  ').trimEnd();
  console.log(`bench/node_tools: ${bin}, node ${process.version}, ${os.cpus().length} cores, ` +
    `load average ${load0.toFixed(2)} before, ${os.loadavg()[0].toFixed(2)} after` +
    (smoke ? ' (SMOKE: tiny counts, figures mean nothing)' : ''));
  console.log(fmt(head));
  console.log(w.map((n) => '-'.repeat(n)).join('  '));
  for (const x of rows) console.log(fmt(x));
  for (const n of notes) console.log(`note: ${n}`);
} finally {
  sbx.close();
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  fs.rmSync(tmp, { recursive: true, force: true });
}
