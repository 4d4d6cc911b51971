// Flow control and disposal: writes wait for 'drain' once the socket is
// full (against a real reader that does not read, and a stream of large
// requests to the real daemon), and Client and Session are async
// disposables where Symbol.asyncDispose exists.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, SessionNotFound, DaemonUnavailable } from '../src/index.js';
import { Connection } from '../src/connection.js';
import { startDaemon, until } from './daemon.mjs';

let d;
before(async () => { d = await startDaemon(); });
after(async () => { await d.stop(); });

test('a reader that does not read: later writes wait for drain, then all arrive in order', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxnode-flow-'));
  const sockPath = path.join(dir, 'slow.sock');
  let peer;
  let accept;
  const accepted = new Promise((resolve) => { accept = resolve; });
  const server = net.createServer((s) => { s.pause(); peer = s; accept(); });
  await new Promise((resolve) => server.listen(sockPath, resolve));
  const conn = new Connection(sockPath);
  try {
    await conn.open();
    await accepted;
    const N = 24;
    const size = 256 * 1024;
    const big = 'x'.repeat(size);
    const promises = [];
    for (let i = 0; i < N; i++) promises.push(conn.request('echo', { i, big }).promise);
    // the socket holds at most its highWaterMark plus the line that filled it;
    // without flow control it would hold all 6 MiB
    const line = size + 100;
    assert.ok(conn.drainWaits >= 1, 'no write waited for drain');
    assert.ok(conn.socket.writableLength <= conn.socket.writableHighWaterMark + line,
      `the socket buffers ${conn.socket.writableLength} bytes`);
    assert.ok(conn._queue.length >= N / 2, `${conn._queue.length} lines wait`);
    // now read: every line arrives whole, in the order sent; answer each
    const ids = [];
    let parts = [];
    peer.on('data', (chunk) => {
      let nl;
      while ((nl = chunk.indexOf(10)) >= 0) {
        const msg = JSON.parse(Buffer.concat([...parts, chunk.subarray(0, nl)]).toString());
        parts = [];
        chunk = chunk.subarray(nl + 1);
        assert.equal(msg.params.big, big);
        ids.push(msg.params.i);
        peer.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: msg.params.i }) + '\n');
      }
      if (chunk.length) parts.push(chunk);
    });
    peer.resume();
    assert.deepEqual(await Promise.all(promises), [...Array(N).keys()]);
    assert.deepEqual(ids, [...Array(N).keys()]);
    assert.equal(conn._queue.length, 0);
  } finally {
    conn.close();
    peer?.destroy();
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a stream of large requests to the real daemon: flow control, every result right', async () => {
  const client = new Client({ socketPath: d.socketPath });
  try {
    await client.ping();
    const conn = client._current;
    const N = 12;
    const runs = [];
    for (let i = 0; i < N; i++) {
      const s = String.fromCharCode(97 + i).repeat(512 * 1024 + i);
      runs.push(client.execute('return #s, s:sub(1, 1)', { bindings: [['s', s]] }));
    }
    assert.ok(conn.socket.writableLength <= conn.socket.writableHighWaterMark + 512 * 1024 + 200,
      `the socket buffers ${conn.socket.writableLength} bytes`);
    const rs = await Promise.all(runs);
    rs.forEach((r, i) => assert.deepEqual(r.value, [512 * 1024 + i, String.fromCharCode(97 + i)]));
    assert.ok(conn.drainWaits >= 1, 'no write waited for drain');
    assert.equal(conn._queue.length, 0);
  } finally {
    client.close();
  }
});

const hasDispose = typeof Symbol.asyncDispose === 'symbol';

test('Client and Session dispose through Symbol.asyncDispose', { skip: !hasDispose && 'no Symbol.asyncDispose here' }, async () => {
  const client = new Client({ socketPath: d.socketPath });
  const s = await client.session({ bindings: [['k', 1]] });
  assert.equal((await s.execute('return k')).value, 1);
  await s[Symbol.asyncDispose]();
  await assert.rejects(s.execute('return k'), SessionNotFound);
  await s[Symbol.asyncDispose]();                       // already closed: no error
  await client[Symbol.asyncDispose]();
  await assert.rejects(client.execute('return 1'), DaemonUnavailable);
  await until(async () => {
    const c = new Client({ socketPath: d.socketPath });
    try { return (await c.describe()).state.connections === 1; } finally { c.close(); }
  }, 10000, 'the disposed client to disconnect');
});

test('await using, where the syntax exists', async (t) => {
  let fn;
  try {
    fn = new Function('Client', 'socketPath',
      'return (async () => { let seen; { await using c = new Client({ socketPath }); seen = c;' +
      ' await c.ping(); } return seen; })();');
  } catch (e) {
    assert.ok(e instanceof SyntaxError, e);
    t.skip(`no \`await using\` syntax in Node ${process.version}`);
    return;
  }
  const c = await fn(Client, d.socketPath);
  await assert.rejects(c.execute('return 1'), DaemonUnavailable);
});
