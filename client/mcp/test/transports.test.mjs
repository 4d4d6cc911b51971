// sandboxd-mcp over HTTP, both ways, end to end with the real daemon:
// downstream servers reached by URL (the reference server-everything in its
// streamableHttp and sse modes, and a fixture SDK server that requires a
// bearer token, given by an environment variable the config names), and the
// bridge itself served over Streamable HTTP (--http) to the SDK's HTTP client:
// one daemon session per MCP session, closed when the session ends.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

/** server-everything in one of its HTTP modes; resolves its base URL once it listens. */
async function everything(mode) {
  const port = await freePort();
  // its HTTP transports call crypto.randomUUID(), a global Node 18 has only with this flag
  const flags = Number(process.versions.node.split('.')[0]) < 19 ? ['--experimental-global-webcrypto'] : [];
  const c = spawn(process.execPath, [...flags, EVERYTHING, mode], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(c);
  let err = '';
  c.stderr.on('data', (x) => { err += x; });
  await until(() => /(listening|running) on port/i.test(err) || c.exitCode !== null, LIFE_MS, `server-everything ${mode} to listen`);
  assert.equal(c.exitCode, null, err);
  return `http://127.0.0.1:${port}`;
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

before(async () => {
  d = await startDaemon();
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
    ev_http: { type: 'http', url: `${streamable}/mcp` },
    ev_sse: { type: 'sse', url: `${sse}/sse` },
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
