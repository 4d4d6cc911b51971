// Every block and command of this package's README, checked against the real
// daemon, the bridge and the MCP servers it names, as tests/readme does for
// the top README: each fenced block and each command in backticks is claimed
// by a check here (or by the suite that runs it), so one added without a
// check fails this suite.
//
// One bridge runs for all of them, started as the README's host config
// starts it, on the README's servers.json.  What is put in place of the
// README's: the paths (/path/to/... and /home/me/notes: this checkout and a
// scratch directory), the daemon's socket, `npx -y PACKAGE` by the package
// installed here (which is what npx runs when it is installed), and a short
// --queue-wait-ms so that a busy answer comes soon.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { spawn } from 'node:child_process';
import { Bridge } from '../src/bridge.js';
import { MIN_RESULT_CHARS } from '../src/render.js';
import { refusal } from '../src/confirm.js';
import { IDLE_MS } from '../src/http.js';
import { startDaemon, SCALE } from '../../node/test/daemon.mjs';
import { readme, claim, shLines } from '../../node/test/readme.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.resolve(HERE, '..');
const REPO = path.resolve(PKG, '..', '..');
const BIN = path.join(PKG, 'bin', 'sandboxd-mcp.js');
const README = readme(path.join(PKG, 'README.md'));
const MAKEFILE = fs.readFileSync(path.join(REPO, 'Makefile'), 'utf8');

const blockOf = (lang, start) => {
  const [b] = README.blocks.filter((x) => x.lang === lang && x.body.startsWith(start));
  return b.body;
};
const SERVERS_START = '{\n  "mcpServers": {\n    "everything"';
const REMOTE_START = '{\n  "mcpServers": {\n    "github"';
const SYNOPSIS_START = 'node client/mcp/bin/sandboxd-mcp.js --config servers.json [--socket';
const HTTP_START = 'node client/mcp/bin/sandboxd-mcp.js --config servers.json --http';
const HOST_START = '{\n  "mcpServers": {\n    "sandboxd"';

let d;
let tmp;
let notes;
let host;

/** The README's servers.json, with npx's package run from node_modules and
 * the notes directory put in place. */
function servers() {
  const cfg = JSON.parse(blockOf('json', SERVERS_START).replaceAll('/home/me/notes', notes));
  for (const spec of Object.values(cfg.mcpServers)) {
    assert.equal(spec.command, 'npx');
    assert.equal(spec.args[0], '-y');
    const pkg = spec.args[1];
    const meta = JSON.parse(fs.readFileSync(path.join(PKG, 'node_modules', pkg, 'package.json'), 'utf8'));
    const bin = typeof meta.bin === 'string' ? meta.bin : Object.values(meta.bin)[0];
    spec.command = process.execPath;
    spec.args = [path.join(PKG, 'node_modules', pkg, bin), ...spec.args.slice(2)];
  }
  return cfg;
}

before(async () => {
  d = await startDaemon();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxmcp-readme-'));
  notes = path.join(tmp, 'notes');
  fs.mkdirSync(notes);
  for (const [n, v] of [['a.txt', '5'], ['b.txt', '7\n'], ['c.txt', 'seven'], ['d.md', '100']]) {
    fs.writeFileSync(path.join(notes, n), v);
  }
  const serversFile = path.join(tmp, 'servers.json');
  fs.writeFileSync(serversFile, JSON.stringify(servers()));
  // the host's config block, as a host runs it
  const conf = JSON.parse(blockOf('json', HOST_START)).mcpServers.sandboxd;
  assert.equal(conf.command, 'node');
  const args = conf.args.map((a) => a
    .replace('/path/to/sandboxd/', `${REPO}/`)
    .replace('/path/to/servers.json', serversFile)
    .replace('/run/sandboxd/sandboxd.sock', d.socketPath));
  assert.equal(args[0], BIN);
  const transport = new StdioClientTransport({
    command: process.execPath, args: [...args, '--queue-wait-ms', '200'], stderr: 'pipe',
  });
  host = new Client({ name: 'readme-host', version: '1.0.0' });
  await host.connect(transport);
});

after(async () => {
  await host?.close().catch(() => {});
  await d?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const lua = (code) => host.callTool({ name: 'execute_lua', arguments: { code } }, undefined,
  { timeout: 60000 * SCALE });

// ---------------------------------------------------------------- the blocks

/** npm ci is what make test runs to install this package (scripts/npm-ci,
 * whose messages tests/tooling checks); npm install -g of the folder makes
 * the sandboxd-mcp command the package's bin. */
function install(body) {
  assert.deepEqual(shLines(body), ['cd client/mcp && npm ci']);
  assert.match(body, /\(or: npm install -g \.\/client\/mcp\)/);
  assert.match(MAKEFILE, /^\tscripts\/npm-ci client\/mcp$/m);
  const meta = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
  assert.deepEqual(meta.bin, { 'sandboxd-mcp': 'bin/sandboxd-mcp.js' });
  assert.ok(meta.files.includes('bin') && meta.files.includes('src'));
}

/** The synopsis is the bridge's own usage, the values it shows are the
 * defaults, and the option table lists the same options with them. */
function synopsis(body) {
  const shown = body.replace(/\s+/g, ' ').trim();
  assert.ok(shown.startsWith('node client/mcp/bin/sandboxd-mcp.js --config servers.json '), shown);
  const usage = /^const USAGE = ([\s\S]*?)'Under the MCP Inspector/m.exec(fs.readFileSync(BIN, 'utf8'))[1]
    .replace(/'\s*\+\s*'|\\n/g, ' ').replace(/\s+/g, ' ');
  assert.ok(usage.startsWith("'usage: sandboxd-mcp --config SERVERS.json [--socket PATH]"), usage);
  const opts = (s) => [...s.matchAll(/\[(--[\w-]+)(?: ([^\]]+))?\]/g)].map((m) => [m[1], m[2]]);
  assert.deepEqual(opts(shown).map((o) => o[0]), opts(usage).map((o) => o[0]));
  const b = new Bridge({ config: { mcpServers: {} }, log: () => {} });
  const prop = (opt) => opt.slice(2).replace(/-(\w)/g, (_, c) => c.toUpperCase());
  const numeric = opts(shown).filter(([, v]) => /^\d+$/.test(v ?? ''));
  assert.ok(numeric.length >= 4, numeric);
  const fallback = (opt) => (opt === '--http-session-idle-ms' ? IDLE_MS : b[prop(opt)]);
  for (const [opt, v] of numeric) assert.equal(fallback(opt), Number(v), `${opt}: the default is ${fallback(opt)}`);
  assert.equal(opts(shown).find(([o]) => o === '--priority')[1], 'low|normal|high');
  const table = README.text.slice(README.text.indexOf('| option | default | meaning |'));
  const rows = table.split('\n\n')[0].split('\n').slice(2).map((r) => r.split(' | '));
  assert.deepEqual(rows.map((r) => /`(--[\w-]+)`/.exec(r[0])[1]), opts(shown).map((o) => o[0]));
  for (const [opt, v] of numeric) {
    const row = rows.find((r) => r[0].includes(`\`${opt}\``));
    assert.ok(row[1].startsWith(v), `the table's default of ${opt}: ${row[1]}`);
  }
  assert.match(rows.find((r) => r[0].includes('--max-result-chars'))[1], new RegExp(`at least ${MIN_RESULT_CHARS}$`));
}

/** servers.json: both servers start, the denied tools are left out. */
async function serversJson(body) {
  const cfg = JSON.parse(body);
  const r = await lua('return mcp.tools()');
  const listing = JSON.stringify(r.structuredContent.value);
  assert.match(listing, /everything\.get_sum\(/);
  assert.match(listing, /filesystem\.read_text_file\(/);
  for (const t of cfg.mcpServers.filesystem.deny) assert.ok(!listing.includes(`filesystem.${t}(`), t);
}

/** The remote servers: url, headers with ${GITHUB_TOKEN}, type; without the variable, the
 * bridge refuses to start with the message the prose quotes. */
function remoteServers(body) {
  const cfg = JSON.parse(body);
  const b = new Bridge({ config: cfg, env: { GITHUB_TOKEN: 'secret' }, log: () => {} });
  const [github, legacy] = b.downstreams;
  assert.deepEqual([github.spec.kind, github.spec.headers, github.spec.confirm], ['auto', { Authorization: 'Bearer secret' }, 'destructive']);
  assert.deepEqual([legacy.spec.kind, legacy.spec.url.href], ['sse', 'http://127.0.0.1:3001/sse']);
  b.sandboxd.close();
  assert.throws(() => new Bridge({ config: cfg, env: {}, log: () => {} }), (e) => {
    assert.ok(README.text.replace(/\s+/g, ' ').includes(`(\`${e.message}\`)`), e.message);
    return true;
  });
}

const httpAddress = () => /--http (\S+)$/.exec(shLines(blockOf('sh', HTTP_START))[0])[1];

/** The host's block for --http: the url the bridge serves at that address. */
function httpHost(body) {
  assert.deepEqual(JSON.parse(body).mcpServers.sandboxd, { type: 'http', url: `http://${httpAddress()}/mcp` });
}

/** --http ADDRESS: run as written (on port 0, with no servers), it serves at http://ADDRESS/mcp. */
async function httpServe(body) {
  const [line] = shLines(body);
  const address = httpAddress();
  const cfg = path.join(tmp, 'none.json');
  fs.writeFileSync(cfg, '{"mcpServers": {}}');
  const args = line.split(' ').slice(1).map((a) => ({ 'client/mcp/bin/sandboxd-mcp.js': BIN, 'servers.json': cfg, [address]: address.replace(/\d+$/, '0') })[a] ?? a);
  const child = spawn(process.execPath, [...args, '--socket', d.socketPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (x) => { err += x; });
  try {
    const t0 = Date.now();
    while (!/ at (\S+)/.test(err) && child.exitCode === null && Date.now() - t0 < 60000 * SCALE) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.match(err, new RegExp(`serving execute_lua over Streamable HTTP at http://${address.replace(/\d+$/, '')}\\d+/mcp`));
  } finally {
    child.kill('SIGTERM');
  }
}

/** What the model reads for a declined call: confirm.test.mjs gets it from the bridge. */
function declined(body) {
  assert.equal(body.trim(), `error (runtime_error): files.write_file: ${refusal('declined', 'the tool is marked destructive')}`);
  const suite = fs.readFileSync(path.join(HERE, 'confirm.test.mjs'), 'utf8');
  assert.match(suite, /\^error \\\(runtime_error\\\): files\\\.write_file: not run: the user declined this call/);
}

/** The host's block: the bridge the tests talk to was started from it;
 * its description, with the servers above and the default budget, is as
 * long as the Catalog section says. */
async function hostConfig() {
  const { tools } = await host.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['execute_lua']);
  const said = /with the default budget it is ([\d,]+),/.exec(README.text.replace(/\s+/g, ' '))[1];
  assert.equal(tools[0].description.length, Number(said.replace(/,/g, '')));
}

/** The Inspector's commands: run as written by client/mcp/hosts's
 * inspector.test.mjs, which reads them from this README. */
function inspector(body) {
  const lines = body.replace(/\\\n\s*/g, '').split('\n').filter(Boolean);
  assert.ok(lines.every((l) => l.startsWith('npx @modelcontextprotocol/inspector --cli ')), lines);
  const suite = fs.readFileSync(path.join(PKG, 'hosts', 'test', 'inspector.test.mjs'), 'utf8');
  assert.match(suite, /readmeCommands\(\)/);
}

/** The busy answer: what a call behind a long one reads, numbers aside. */
async function busyText(body) {
  const first = lua('local t = os.clock() while os.clock() - t < 1 do end return 1');
  await new Promise((r) => setTimeout(r, 100 * SCALE));
  const r = await lua('return 2');
  assert.equal(r.isError, true);
  const got = r.content[0].text.replace(/\s+/g, ' ');
  const want = body.trim().replace(/\s+/g, ' ');
  const re = new RegExp(`^${want.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\d+\\\.\d/g, '\\d+\\.\\d')}$`);
  assert.match(got, re);
  assert.equal((await first).structuredContent.value, 1);
}

/** The model's chunk, on the notes: the .txt numbers summed by the
 * everything server, and get_sum's refusal caught as its comment says. */
async function example(body) {
  const r = await lua(body.replaceAll('/home/me/notes', notes));
  assert.equal(r.isError, undefined, r.content[0].text);
  assert.deepEqual(r.structuredContent.value, { total: 12, error_seen: true });
  const [, shown] = /-- false, "(.*)\.\.\."$/m.exec(body);
  const e = await lua('return {pcall(everything.get_sum, {a = "one"})}');
  assert.equal(e.structuredContent.value[0], false);
  assert.ok(e.structuredContent.value[1].startsWith(shown), e.structuredContent.value[1]);
}

const BLOCKS = [
  ['sh', 'cd client/mcp && npm ci', install],
  ['sh', SYNOPSIS_START, synopsis],
  ['json', SERVERS_START, serversJson],
  ['json', REMOTE_START, remoteServers],
  ['json', HOST_START, hostConfig],
  ['sh', HTTP_START, httpServe],
  ['json', '{ "mcpServers": { "sandboxd": { "type": "http"', httpHost],
  ['', 'error (runtime_error): files.write_file: not run:', declined],
  ['sh', 'npx @modelcontextprotocol/inspector --cli --method tools/list', inspector],
  ['sh', 'npx @modelcontextprotocol/inspector --cli --config host.json', inspector],
  ['', 'error (busy): not run:', busyText],
  ['lua', 'local listing = filesystem.list_directory', example],
];

test('every block of the README has a check', () => {
  assert.equal(README.blocks.length, BLOCKS.length);
  for (const { lang, body } of README.blocks) claim(BLOCKS, lang, body);
  assert.throws(() => claim(BLOCKS, 'sh', 'node frobnicate\n'), /no check in this suite/);
});

for (const [lang, start, check] of BLOCKS) {
  test(`README block: ${check.name} (${start.split('\n')[0]}...)`, async () => {
    await check(blockOf(lang, start));
  });
}

// `command` in the prose: its check.
const makeTarget = (cmd) => assert.match(MAKEFILE, new RegExp(`^${cmd.split(' ')[1]}:`, 'm'), cmd);
const COMMANDS = {
  'make run': makeTarget,
  'make test-node': makeTarget,
  'make test-node18': makeTarget,
  'make test': makeTarget,
  /** What make test-node runs here and in hosts/. */
  'node --test test/*.test.mjs': () => {
    assert.match(MAKEFILE, /^NODE_SUITES := client\/node client\/mcp client\/mcp\/hosts$/m);
    assert.match(fs.readFileSync(path.join(REPO, 'scripts', 'test-node'), 'utf8'),
                 /\(cd "\$p" && node --test test\/\*\.test\.mjs\)/);
  },
  /** The form that fails: run by hosts/test/inspector.test.mjs. */
  'npx @modelcontextprotocol/inspector --cli node sandboxd-mcp.js --config servers.json': inspector,
  'scripts/node18': (c) => assert.ok(fs.existsSync(path.join(REPO, c))),
};
const COMMAND_RE = /(?:make|node|npm|npx|scripts\/[^\s`]+)(?: [^`]*)?/;
const NOT_COMMANDS = ['node'];   // a name in the text

test('every command in the prose has a check, and passes it', () => {
  const cmds = README.commands(COMMAND_RE);
  assert.ok(cmds.length >= 5, cmds);
  for (const c of cmds.filter((x) => !NOT_COMMANDS.includes(x))) {
    assert.ok(COMMANDS[c], `no check in this suite for \`${c}\``);
    COMMANDS[c](c);
  }
});
