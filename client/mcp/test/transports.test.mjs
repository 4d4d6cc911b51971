// sandboxd-mcp over HTTP, both ways, end to end with the real daemon:
// downstream servers reached by URL (the reference server-everything in its
// streamableHttp and sse modes, and a fixture SDK server that requires a
// bearer token, given by an environment variable the config names), and the
// bridge itself served over Streamable HTTP (--http) to the SDK's HTTP client:
// one daemon session per MCP session, closed when the session ends; request
// bodies up to the daemon's max_message_bytes (or --http-max-body), a larger
// one or one that is not JSON answered with a JSON-RPC error.  Failures: a
// remote server killed during a call and after it (Streamable HTTP and SSE),
// then back, or forgetting its sessions; an address or socket path the bridge
// cannot listen on.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as Sandboxd } from 'sandboxd';
import { Bridge } from '../src/bridge.js';
import { startDaemon, until, SCALE } from '../../node/test/daemon.mjs';
import { startHttpServer } from './fixtures/http-server.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(HERE, '..', 'bin', 'sandboxd-mcp.js');
const EVERYTHING = path.join(HERE, '..', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const TOY = path.join(HERE, 'fixtures', 'toy-server.mjs');
const TOKEN = `token-${process.pid}`;
const LIFE_MS = 60000 * SCALE;

let d;
let sbx;
let tmp;
let remote;
const children = [];

/** A port free on loopback now (server-everything takes its port from $PORT). */
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** server-everything in one of its HTTP modes; resolves { url (its base), child } once it listens. */
async function everything(mode, port) {
  port ??= await freePort();
  // its HTTP transports call crypto.randomUUID(), a global Node 18 has only with this flag
  const flags = Number(process.versions.node.split('.')[0]) < 19 ? ['--experimental-global-webcrypto'] : [];
  const c = spawn(process.execPath, [...flags, EVERYTHING, mode], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(c);
  let err = '';
  c.stderr.on('data', (x) => { err += x; });
  c.posts = 0; // the POSTs it has logged (to stdout) so far
  c.stdout.on('data', (x) => { c.posts += String(x).split('Received MCP POST request').length - 1; });
  await until(() => /(listening|running) on port/i.test(err) || c.exitCode !== null, LIFE_MS, `server-everything ${mode} to listen`);
  assert.equal(c.exitCode, null, err);
  return { url: `http://127.0.0.1:${port}`, port, child: c };
}

function writeConfig(servers) {
  const cfg = path.join(tmp, `servers-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: servers }));
  return cfg;
}

/** The bridge over stdio under the SDK's Client. */
async function stdioBridge(servers, { env = {}, args = [] } = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, '--config', writeConfig(servers), '--socket', d.socketPath, ...args],
    env: { PATH: process.env.PATH, ...env },
    stderr: 'pipe',
  });
  const b = { stderr: '' };
  transport.stderr.on('data', (c) => { b.stderr += c; });
  b.host = new Client({ name: 'test-host', version: '1.0.0' });
  await b.host.connect(transport);
  b.lua = (code) => b.host.callTool({ name: 'execute_lua', arguments: { code } }, undefined, { timeout: 30000 * SCALE });
  b.description = async () => (await b.host.listTools()).tools[0].description;
  return b;
}

/** The bridge with --http ADDRESS; resolves { url, stderr, child, stop() }. */
async function httpBridge(servers, address = '127.0.0.1:0', args = []) {
  const child = spawn(process.execPath, [BIN, '--config', writeConfig(servers), '--socket', d.socketPath, '--http', address, ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  const b = { child, stderr: '' };
  child.stderr.on('data', (c) => { b.stderr += c; });
  await until(() => /serving execute_lua over Streamable HTTP at (\S+)/.test(b.stderr) || child.exitCode !== null,
    LIFE_MS, 'the bridge to listen');
  assert.equal(child.exitCode, null, b.stderr);
  b.url = /serving execute_lua over Streamable HTTP at (\S+)/.exec(b.stderr)[1];
  b.stop = async () => {
    child.kill('SIGTERM');
    await until(() => child.exitCode !== null || child.signalCode !== null, LIFE_MS, 'the bridge to exit');
  };
  return b;
}

/** An SDK Client on the bridge's URL. */
async function httpHost(url, capabilities = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const host = new Client({ name: 'http-host', version: '1.0.0' }, { capabilities });
  await host.connect(transport);
  await host.listTools(); // caches execute_lua's outputSchema: callTool checks results against it
  return { host, transport, lua: (code) => host.callTool({ name: 'execute_lua', arguments: { code } }, undefined, { timeout: 30000 * SCALE }) };
}

const value = (r) => {
  assert.ok(!r.isError, `execute_lua failed: ${r.content?.[0]?.text}`);
  return r.structuredContent.value;
};

// max_code_bytes raised above its 65536 for the large-body test; max_message_bytes is the launcher's 1 MiB
const MAX_CODE = 262144;
const MAX_MESSAGE = 1048576;

before(async () => {
  d = await startDaemon({ daemon: { max_code_bytes: MAX_CODE, max_message_bytes: MAX_MESSAGE } });
  sbx = new Sandboxd({ socketPath: d.socketPath });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxmcp-http-'));
  remote = await startHttpServer(TOKEN);
});

after(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await remote?.close();
  sbx.close();
  await d.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('downstream by URL: Streamable HTTP and SSE, server-everything and a server that needs a bearer token from $VAR', async () => {
  const [streamable, sse] = await Promise.all([everything('streamableHttp'), everything('sse')]);
  const b = await stdioBridge({
    ev_http: { type: 'http', url: `${streamable.url}/mcp` },
    ev_sse: { type: 'sse', url: `${sse.url}/sse` },
    authed: { url: remote.url('/mcp'), headers: { Authorization: 'Bearer ${MCP_TEST_TOKEN}' } },
    legacy: { url: remote.url('/legacy'), headers: { Authorization: 'Bearer ${MCP_TEST_TOKEN}' } },
    anonymous: { url: remote.url('/mcp') },
  }, { env: { MCP_TEST_TOKEN: TOKEN } });
  try {
    const v = value(await b.lua(`return {
      ev_http.get_sum({a = 1, b = 2}), ev_sse.get_sum({a = 3, b = 4}),
      authed.whoami(), legacy.whoami(), legacy.add({a = 20, b = 22})}`));
    assert.deepEqual(v, ['The sum of 1 and 2 is 3.', 'The sum of 3 and 4 is 7.',
      { authorization: `Bearer ${TOKEN}`, via: 'streamable' }, { authorization: `Bearer ${TOKEN}`, via: 'sse' }, 42]);
    // `legacy` has no type: Streamable HTTP first (a POST answered 405), then SSE
    assert.match(b.stderr, /server "legacy": Streamable HTTP failed \(HTTP 405: Streamable HTTP error: Error POSTing to endpoint: .*\); trying SSE/);
    assert.ok(remote.seen.some((s) => s.method === 'POST' && s.path === '/legacy'));
    // without the header: 401, no fallback to SSE, left out and said so
    const desc = await b.description();
    assert.match(desc, /## Servers not available\n- anonymous: failed to start: Streamable HTTP error: Error POSTing to endpoint: \{"error":"unauthorized"\}/);
    assert.ok(!remote.seen.some((s) => s.path === '/mcp' && s.method === 'GET' && s.authorization === null));
    assert.match(desc, /ev_http\.echo\(\{message: string\}\) \[read-only, idempotent\]|ev_http\.echo\(\{message: string\}\) \[read-only\]/);
    assert.ok(remote.seen.filter((s) => s.authorization !== null).every((s) => s.authorization === `Bearer ${TOKEN}`));
  } finally {
    await b.host.close();
  }
});

test('config errors: an unset ${VAR} stops the bridge at startup (exit 1); a bad url, type or confirm too', async () => {
  const r = await new Promise((resolve) => {
    const spec = { url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 'Bearer ${NOT_SET_ANYWHERE}' } };
    const c = spawn(process.execPath, [BIN, '--config', writeConfig({ s: spec }), '--socket', d.socketPath],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
    let err = '';
    c.stderr.on('data', (x) => { err += x; });
    c.on('exit', (status) => resolve({ status, err }));
  });
  assert.equal(r.status, 1, r.err);
  assert.match(r.err, /server "s": headers\.Authorization names the environment variable NOT_SET_ANYWHERE, which is not set/);
  // the same check, in process, for the other mistakes (the bin prints what the constructor throws)
  for (const [spec, rx] of [
    [{ url: '${NOT_SET_EITHER}/mcp' }, /server "s": "url" names the environment variable NOT_SET_EITHER, which is not set$/],
    [{ url: 'ftp://x/mcp' }, /"url" must be http: or https:/],
    [{ url: 'http://x/mcp', type: 'websocket' }, /"type" "websocket" is not one of/],
    [{ url: 'http://x/mcp', command: 'node' }, /both "url" and "command"/],
    [{ command: 'node', confirm: 'sometimes' }, /"confirm" takes destructive, all, none or a list of tool names/],
  ]) {
    assert.throws(() => new Bridge({ config: { mcpServers: { s: spec } }, env: {}, log: () => {} }), rx);
  }
});

test('--http: one daemon session per MCP session, closed by DELETE; Lua state not shared', async () => {
  const b = await httpBridge({ toy: { command: process.execPath, args: [TOY, 'http'] } });
  try {
    assert.match(b.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const sessions = async () => (await sbx.describe()).state.sessions;
    const base = await sessions();
    const one = await httpHost(b.url);
    const two = await httpHost(b.url);
    assert.notEqual(one.transport.sessionId, two.transport.sessionId);
    value(await one.lua('mine = "one" function f() return 1 end'));
    value(await two.lua('mine = "two"'));
    assert.deepEqual(value(await one.lua('return {mine, type(f), toy.pid().pid > 0}')), ['one', 'function', true]);
    assert.deepEqual(value(await two.lua('return {mine, type(f)}')), ['two', 'nil']);
    assert.equal(await sessions(), base + 2);
    await one.transport.terminateSession(); // DELETE
    await until(async () => (await sessions()) === base + 1, LIFE_MS, 'the first daemon session to close');
    await one.host.close();
    // the session is gone: its id is refused
    const stale = await fetch(b.url, { method: 'POST', headers: { 'content-type': 'application/json',
      accept: 'application/json, text/event-stream', 'mcp-session-id': one.transport.sessionId ?? 'x' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
    assert.equal(stale.status, 404);
    assert.deepEqual(value(await two.lua('return mine')), 'two');
    // DNS rebinding: a Host other than loopback is refused before anything is read
    const rebound = await new Promise((resolve) => {
      const u = new URL(b.url);
      const s = net.connect(Number(u.port), '127.0.0.1', () => {
        s.end('POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
      });
      let got = '';
      s.on('data', (x) => { got += x; });
      s.on('close', () => resolve(got));
    });
    assert.match(rebound, /^HTTP\/1\.1 403/);
    await two.host.close();
  } finally {
    await b.stop();
  }
  assert.match(b.stderr, /serving execute_lua over Streamable HTTP/);
  await until(async () => (await sbx.describe()).state.sessions === 0, LIFE_MS, 'every daemon session to close with the bridge');
});

/** One JSON-RPC POST to /mcp over the Unix socket: { status, sessionId }. */
function post(sock, body, sessionId) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock, path: '/mcp', method: 'POST', headers: {
      host: 'localhost', 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' } : {}),
    } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, sessionId: res.headers['mcp-session-id'] }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('--http on a Unix socket path; an idle MCP session is closed; a non-loopback address needs --allow-remote', async () => {
  const sock = path.join(tmp, 'bridge.sock');
  const b = await httpBridge({}, sock, ['--http-session-idle-ms', String(500 * SCALE)]);
  try {
    assert.equal(b.url, `unix:${sock}`);
    assert.ok(fs.statSync(sock).isSocket());
    const init = await post(sock, { jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    assert.equal(init.status, 200);
    assert.match(init.sessionId, /^[0-9a-f-]{36}$/);
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    assert.equal((await post(sock, list, init.sessionId)).status, 200); // in use: kept
    await until(() => b.stderr.includes(`MCP session ${init.sessionId}: no request for ${500 * SCALE} ms; closed`),
      LIFE_MS, 'the idle session to close');
    assert.equal((await post(sock, list, init.sessionId)).status, 404);
  } finally {
    await b.stop();
  }
  const r = await new Promise((resolve) => {
    const c = spawn(process.execPath, [BIN, '--config', writeConfig({}), '--http', '0.0.0.0:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    c.stderr.on('data', (x) => { err += x; });
    c.on('exit', (status) => resolve({ status, err }));
  });
  assert.equal(r.status, 2);
  assert.match(r.err, /--http 0\.0\.0\.0: not a loopback address\. The bridge neither authenticates nor encrypts/);
});

/** What stock Lua 5.3 (lua5.3) makes of a chunk that returns a string. */
function stockLua(code) {
  const file = path.join(tmp, 'stock.lua');
  fs.writeFileSync(file, code);
  const r = spawnSync('lua5.3', ['-e', `io.write((dofile(${JSON.stringify(file)})))`], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

/** A raw POST to the bridge's /mcp: { status, type, body (parsed when JSON) }. */
function rawPost(url, body, headers = {}) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (x) => { text += x; });
      res.on('end', () => {
        let parsed = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON: the assertions show it */ }
        resolve({ status: res.statusCode, type: res.headers['content-type'], body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('--http: bodies up to the daemon\'s max_message_bytes (a 150 kB chunk runs); larger ones and bad JSON get JSON-RPC errors', async () => {
  const b = await httpBridge({});
  const capped = await httpBridge({}, '127.0.0.1:0', ['--http-max-body', '200000']);
  try {
    assert.match(b.stderr, new RegExp(`request bodies up to ${MAX_MESSAGE} bytes`));
    assert.match(capped.stderr, /request bodies up to 200000 bytes/);
    // ~150 kB of Lua (a long string, escaped in JSON), far past Express's default 100 kB
    const lines = Array.from({ length: 3300 }, (_, i) => `line ${i}: the quick brown fox, ${i * 7}\t"jumps"`);
    const code = `local s = [[\n${lines.join('\n')}\n]]
local n, sum = 0, 0
for w in s:gmatch(", (%d+)") do n = n + 1 sum = sum + tonumber(w) end
return string.format("%d %d %d %q", #s, n, sum, s:sub(-24))`;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'execute_lua', arguments: { code } } });
    assert.ok(body.length > 150000 && code.length < MAX_CODE, `${body.length} bytes`);
    const h = await httpHost(b.url);
    const want = stockLua(code);
    assert.match(want, /^\d+ 3300 38103450 "/);
    assert.equal(value(await h.lua(code)), want);
    // over the bound: 413 and a JSON-RPC error naming it, from the SDK's client and raw
    const huge = `return #"${'x'.repeat(MAX_MESSAGE)}"`;
    await assert.rejects(h.lua(huge), (e) => {
      assert.equal(e.code, 413);
      assert.match(e.message, new RegExp(`^Streamable HTTP error: Error POSTing to endpoint: \\{"jsonrpc":"2\\.0","error":\\{"code":-32000,"message":"Payload Too Large: the request body is over ${MAX_MESSAGE} bytes`));
      return true;
    });
    const sid = { 'mcp-session-id': h.transport.sessionId, 'mcp-protocol-version': h.transport.protocolVersion };
    const over = await rawPost(b.url, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call',
      params: { name: 'execute_lua', arguments: { code: huge } } }), sid);
    assert.equal(over.status, 413);
    assert.match(over.type, /^application\/json/);
    assert.deepEqual(over.body, { jsonrpc: '2.0', id: null, error: { code: -32000, message:
      `Payload Too Large: the request body is over ${MAX_MESSAGE} bytes, the bridge's bound (--http-max-body, else the daemon's max_message_bytes)` } });
    // not JSON: 400 and JSON-RPC's parse error, in JSON
    const bad = await rawPost(b.url, '{"jsonrpc": "2.0", "id": 5, "method": ', sid);
    assert.deepEqual([bad.status, bad.body], [400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the request body is not JSON' } }]);
    // the session is still good
    assert.equal(value(await h.lua('return 6 * 7')), 42);
    // --http-max-body 200000: the 150 kB body is under it, a 210 kB one over
    const c = await httpHost(capped.url);
    assert.equal(value(await c.lua(code)), want);
    await assert.rejects(c.lua(`return #"${'y'.repeat(210000)}"`), (e) => e.code === 413 && /over 200000 bytes/.test(e.message));
    assert.equal(value(await c.lua('return "still here"')), 'still here');
    // a Host other than loopback is refused (403) before a body over the bound is read (not 413)
    const rebound = await rawPost(b.url, 'x'.repeat(MAX_MESSAGE + 10), { host: 'evil.example' });
    assert.deepEqual([rebound.status, rebound.body.error.message], [403, 'Invalid Host: evil.example']);
    await h.host.close();
    await c.host.close();
  } finally {
    await b.stop();
    await capped.stop();
  }
});


test('a downstream Streamable HTTP server killed mid-session: its calls fail at once with errors the model reads; it comes back in a new session', async () => {
  const ev = await everything('streamableHttp');
  const b = await httpBridge({
    ev: { type: 'http', url: `${ev.url}/mcp` },
    authed: { url: remote.url('/mcp'), headers: { Authorization: `Bearer ${TOKEN}` } },
    toy: { command: process.execPath, args: [TOY, 'http'] },
  });
  const h = await httpHost(b.url);
  try {
    assert.equal(value(await h.lua('n = 0 return ev.get_sum({a = 1, b = 2})')), 'The sum of 1 and 2 is 3.');
    // killed during a call that would take 30 s: the call fails at once, not at the chunk's timeout
    const t0 = Date.now();
    const posts = ev.child.posts;
    const during = h.lua('n = n + 1 return ev.trigger_long_running_operation({duration = 30, steps = 30})');
    await until(() => ev.child.posts > posts, LIFE_MS, 'the call to reach server-everything');
    await new Promise((r) => setTimeout(r, 1000 * SCALE)); // its answer's SSE stream open (else the POST fails)
    ev.child.kill('SIGKILL');
    const r1 = await during;
    const ms = Date.now() - t0;
    assert.ok(ms < 10000 * SCALE, `${ms} ms`);
    assert.ok(r1.isError);
    const refused = `connect ECONNREFUSED 127\\.0\\.0\\.1:${ev.port}`;
    // (killed before the stream opened, the POST itself fails: "the connection failed during the call")
    assert.match(r1.content[0].text, new RegExp('^error \\(runtime_error\\): ev\\.trigger_long_running_operation: server "ev" ' +
      `(closed the connection during the call \\(${refused}\\)|: the connection failed during the call \\(other side closed\\)); it may or may not have run\n`));
    // the next call: not made, and said so; pcall catches it as a string
    const r2 = await h.lua('n = n + 1 return ev.get_sum({a = 3, b = 4})');
    assert.match(r2.content[0].text, new RegExp(`^error \\(runtime_error\\): ev\\.get_sum: server "ev" cannot be reached \\(${refused}\\); the call was not made\n`));
    const [ok, msg, n] = value(await h.lua('local ok, e = pcall(ev.get_sum, {a = 5, b = 6}) return {ok, e, n}'));
    assert.deepEqual([ok, n], [false, 2]);
    assert.match(msg, new RegExp(`^ev\\.get_sum: server "ev" cannot be reached \\(${refused}\\); the call was not made$`));
    // the bridge goes on: its other servers and its Lua state
    assert.deepEqual(value(await h.lua('return {n, toy.pid().pid > 0, authed.add({a = 1, b = 1})}')), [2, true, 2]);
    assert.match(b.stderr, new RegExp(`server "ev": connection lost \\(${refused}\\); the next call opens a new session`));
    // the server is back on its port: the next call opens a new session and runs
    const again = await everything('streamableHttp', ev.port);
    assert.equal(value(await h.lua('return ev.get_sum({a = 20, b = 22})')), 'The sum of 20 and 22 is 42.');
    assert.match(b.stderr, /server "ev": connected again, in a new session/);
    // a server that forgot the session (404, as after a restart): the call is made again in a new one
    const before = remote.seen.length;
    remote.forget();
    assert.deepEqual(value(await h.lua('return authed.add({a = 40, b = 2})')), 42);
    assert.deepEqual(remote.seen.slice(before).map((x) => x.method).slice(0, 2), ['POST', 'POST']);
    assert.match(b.stderr, /server "authed": connection lost \(HTTP 404: the server ended the session\)/);
    again.child.kill('SIGKILL');
  } finally {
    await h.host.close();
    await b.stop();
  }
});

test('a downstream SSE server killed during a call: the call fails at once, the next is not made, and it comes back', async () => {
  const ev = await everything('sse');
  const b = await stdioBridge({ ev: { type: 'sse', url: `${ev.url}/sse` } });
  try {
    assert.equal(value(await b.lua('return ev.get_sum({a = 1, b = 2})')), 'The sum of 1 and 2 is 3.');
    const t0 = Date.now();
    const during = b.lua('return ev.trigger_long_running_operation({duration = 30, steps = 30})');
    await new Promise((r) => setTimeout(r, 1000 * SCALE));
    ev.child.kill('SIGKILL');
    const r1 = await during;
    assert.ok(Date.now() - t0 < 10000 * SCALE, `${Date.now() - t0} ms`);
    assert.match(r1.content[0].text, /^error \(runtime_error\): ev\.trigger_long_running_operation: server "ev" closed the connection during the call \(.*\); it may or may not have run\n/);
    const r2 = await b.lua('return ev.get_sum({a = 3, b = 4})');
    assert.match(r2.content[0].text, new RegExp(`^error \\(runtime_error\\): ev\\.get_sum: server "ev" cannot be reached \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${ev.port}\\); the call was not made\n`));
    const again = await everything('sse', ev.port);
    assert.equal(value(await b.lua('return ev.get_sum({a = 20, b = 22})')), 'The sum of 20 and 22 is 42.');
    again.child.kill('SIGKILL');
  } finally {
    await b.host.close();
  }
});

/** The processes whose command line has `marker`. */
function pidsWith(marker) {
  return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
    } catch {
      return false; // gone meanwhile
    }
  });
}

/** The bridge with --http ADDRESS that is expected to exit: resolves { status, err }. */
function httpBridgeExit(address, servers = {}) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [BIN, '--config', writeConfig(servers), '--socket', d.socketPath, '--http', address],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (x) => { err += x; });
    c.on('exit', (status) => resolve({ status, err }));
  });
}

test('--http where it cannot listen: one line and exit 1; a live socket or a file is left alone, a stale socket replaced', async () => {
  // a port in use
  const taken = net.createServer();
  await new Promise((r) => taken.listen(0, '127.0.0.1', r));
  const { port } = taken.address();
  try {
    const r = await httpBridgeExit(`127.0.0.1:${port}`, { toy: { command: process.execPath, args: [TOY, 'http-port-in-use'] } });
    assert.equal(r.status, 1, r.err);
    assert.equal(r.err, `sandboxd-mcp: --http: cannot listen on 127.0.0.1:${port}: the address is in use\n`);
    await until(() => pidsWith('http-port-in-use').length === 0, LIFE_MS, 'its downstream server to stop with it');
  } finally {
    taken.close();
  }
  // a socket path another bridge serves on: refused, and that bridge still serves
  const sock = path.join(tmp, 'taken.sock');
  const first = await httpBridge({}, sock);
  try {
    const r = await httpBridgeExit(sock);
    assert.equal(r.status, 1, r.err);
    assert.equal(r.err, `sandboxd-mcp: --http: cannot listen on ${sock}: it is in use (something answers on that socket)\n`);
    const init = await post(sock, { jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    assert.equal(init.status, 200);
  } finally {
    first.child.kill('SIGKILL'); // leaves its socket file behind
    await until(() => first.child.signalCode !== null, LIFE_MS, 'the first bridge to die');
  }
  // that stale socket file is replaced
  assert.ok(fs.statSync(sock).isSocket());
  const second = await httpBridge({}, sock);
  await second.stop();
  assert.ok(!fs.existsSync(sock));
  // a path that is not a socket is never removed
  const file = path.join(tmp, 'not-a-socket.json');
  fs.writeFileSync(file, '{"keep": true}');
  const r = await httpBridgeExit(file);
  assert.equal(r.status, 1, r.err);
  assert.equal(r.err, `sandboxd-mcp: --http: cannot listen on ${file}: it exists and is not a socket\n`);
  assert.equal(fs.readFileSync(file, 'utf8'), '{"keep": true}');
});
