// The features a daemon lists in describe's `features`, through the Node
// client: sessions, parallel tool calls, live output, max_tool_calls and
// function names that are not Lua identifiers, each where the daemon lists
// it, and a clear Unsupported error from the client where it does not.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Unsupported, SessionNotFound, LuaError, LimitExceeded } from '../src/index.js';
import { startDaemon, until } from './daemon.mjs';

let d;
let client;
let features;
before(async () => {
  d = await startDaemon();
  client = new Client({ socketPath: d.socketPath });
  features = await client.features();
});
after(async () => {
  client.close();
  await d.stop();
});

test('sessions keep functions between chunks (or Unsupported without the feature)', async (t) => {
  if (!features.has('sessions')) {
    await assert.rejects(client.session(), (e) => {
      assert.ok(e instanceof Unsupported);
      assert.equal(e.kind, 'unsupported');
      assert.match(e.message, /"sessions" feature/);
      return true;
    });
    t.diagnostic('daemon without sessions: checked the Unsupported error only');
    return;
  }
  const s = await client.session({ tools: { T: { inc: (x) => x + 1 } } });
  assert.equal(typeof s.id, 'string');
  await s.execute('function twice(x) return 2 * T.inc(x) end; n = 1');
  const r = await s.execute('n = n + 1; return twice(n)');
  assert.equal(r.value, 6);
  await assert.rejects(s.execute('error("boom")'), LuaError); // the session stays open
  assert.equal((await s.execute('return n')).value, 2);
  const snap = await s.snapshot();
  assert.ok(snap.bindingNames.includes('n'));
  const r2 = await client.execute('return n', { bindings: snap.bindings });
  assert.equal(r2.value, 2);
  await assert.rejects(s.execute('return 1', { tools: {} }), TypeError);
  await s.close();
  await assert.rejects(s.execute('return 1'), SessionNotFound);
});

test('a session ends with a limit or a cancel, and with its connection', async (t) => {
  if (!features.has('sessions')) {
    t.skip('daemon without the "sessions" feature');
    return;
  }
  const s = await client.session({ timeoutMs: 300 });
  await s.execute('x = 1');
  await assert.rejects(s.execute('while true do end'), (e) => {
    assert.equal(e.kind, 'timeout');
    assert.equal(e.data.session_closed, true);
    return true;
  });
  await assert.rejects(s.execute('return x'), SessionNotFound);

  const s2 = await client.session();
  const ac = new AbortController();
  const p = s2.execute("print('in'); while true do end", { signal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(p, (e) => e.kind === 'cancelled');
  await assert.rejects(s2.execute('return 1'), SessionNotFound);

  const other = new Client({ socketPath: d.socketPath });
  const s3 = await other.session();
  assert.equal((await s3.execute('y = 5 return y')).value, 5);
  other.close();
  await assert.rejects(s3.execute('return y'), (e) => e.kind === 'session_not_found' || e.kind === 'daemon_unavailable');
  await until(async () => (await client.describe()).state.workers === 0, undefined, 'the session workers to go');
});

test('parallel: several tool calls of one execution at once, answered out of order', async (t) => {
  if (!features.has('parallel')) {
    t.skip('daemon without the "parallel" feature');
    return;
  }
  // every call waits until all three are outstanding, then they are
  // answered last first: only concurrent serving can finish this
  let arrived = 0;
  let allIn;
  const all = new Promise((r) => { allIn = r; });
  const order = [];
  const tools = {
    T: {
      slow: async (k) => {
        if (++arrived === 3) allIn();
        await all;
        await new Promise((r) => setTimeout(r, (4 - k) * 30));
        order.push(k);
        return k * 10;
      },
    },
  };
  const r = await client.execute(
    'return parallel(function() return T.slow(1) end, function() return T.slow(2) end, function() return T.slow(3) end)',
    { tools, timeoutMs: 5000 });
  assert.deepEqual(r.value, [10, 20, 30]);
  assert.deepEqual(order, [3, 2, 1]);
  assert.equal(r.stats.tool_calls, 3);
});

test('parallel: cancelling with several calls outstanding aborts each tool signal', async (t) => {
  if (!features.has('parallel')) {
    t.skip('daemon without the "parallel" feature');
    return;
  }
  const signals = [];
  const ac = new AbortController();
  const p = client.execute('return parallel(function() return T.wait() end, function() return T.wait() end, function() return T.wait() end)', {
    signal: ac.signal,
    tools: { T: { wait: (ctx) => { signals.push(ctx.signal); return new Promise(() => {}); } } },
  });
  await until(() => signals.length === 3, undefined, 'three outstanding calls');
  ac.abort();
  await assert.rejects(p, (e) => e.kind === 'cancelled' && e.stats?.tool_calls === 3);
  assert.ok(signals.every((s) => s.aborted));
  // a tool error inside parallel is raised after all have finished, catchable
  const r = await client.execute(`
    local ok, err = pcall(parallel, function() return T.ok() end, function() return T.bad() end)
    return ok, err`, { tools: { T: { ok: () => 1, bad: () => { throw new Error('nope'); } } } });
  assert.deepEqual(r.value, [false, 'T.bad: nope']);
});

test('live output through onOutput (or Unsupported without the feature)', async (t) => {
  if (!features.has('stream_output')) {
    await assert.rejects(client.execute('print(1)', { onOutput: () => {} }), (e) => {
      assert.ok(e instanceof Unsupported);
      assert.match(e.message, /"stream_output" feature/);
      return true;
    });
    t.diagnostic('daemon without stream_output: checked the Unsupported error only');
    return;
  }
  const chunks = [];
  let sawBeforeEnd = false;
  const r = await client.execute("print('one'); T.mark(); print('two')", {
    onOutput: (text) => chunks.push(text),
    tools: { T: { mark: async () => { await until(() => chunks.length > 0, undefined, 'live output'); sawBeforeEnd = true; return true; } } },
  });
  assert.ok(sawBeforeEnd, 'output arrived while the chunk ran');
  assert.equal(chunks.join(''), 'one\ntwo\n');
  assert.equal(r.output, 'one\ntwo\n');
});

test('max_tool_calls ends the execution with tool_call_limit', async (t) => {
  if (!features.has('max_tool_calls')) {
    t.skip('daemon without the "max_tool_calls" feature');
    return;
  }
  let calls = 0;
  await assert.rejects(client.execute('for i = 1, 10 do pcall(T.f) end', {
    limits: { max_tool_calls: 3 },
    tools: { T: { f: () => ++calls } },
  }), (e) => {
    assert.ok(e instanceof LimitExceeded);
    assert.equal(e.kind, 'tool_call_limit');
    assert.equal(calls, 3);
    return true;
  });
});

test('function names that are not Lua identifiers', async (t) => {
  if (!features.has('any_function_names')) {
    t.skip('daemon without the "any_function_names" feature');
    return;
  }
  const r = await client.execute('return Acct["valid?"](5), Acct["get-sum"](1, 2)', {
    tools: { Acct: { 'valid?': (x) => x > 3, 'get-sum': (a, b) => a + b } },
  });
  assert.deepEqual(r.value, [true, 3]);
});
