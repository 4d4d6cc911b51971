// The Node client against the real daemon: values, tools, concurrency,
// cancellation, errors, size guards and encodings.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  Client, ToolAbort, SandboxdError, LuaError, LimitExceeded, Cancelled, ToolAborted, InvalidRequest,
} from '../src/index.js';
import { startDaemon, until } from './daemon.mjs';

let d;
let client;
before(async () => {
  d = await startDaemon();
  client = new Client({ socketPath: d.socketPath });
});
after(async () => {
  client.close();
  await d.stop();
});

const workers = async () => (await client.describe()).state.workers;

test('execute returns value, output, bindings and stats; bindings carry state', async () => {
  const r = await client.execute('x = 40; print("hi"); return x + 2, 2.5, {1, 2}, {a = true}');
  assert.deepEqual(r.value, [42, 2.5, [1, 2], { a: true }]);
  assert.equal(r.output, 'hi\n');
  assert.equal(r.outputTruncated, false);
  assert.deepEqual(r.bindingNames, ['x']);
  assert.equal(typeof r.stats.wall_us, 'number');
  const r2 = await client.execute('return x * 2', { bindings: r.bindings });
  assert.equal(r2.value, 80);
  assert.deepEqual(await client.bindingNames(r.bindings), ['x']);
  assert.deepEqual(await client.check('return 1'), { ok: true });
  assert.deepEqual(await client.ping(), {});
  const p = await client.promptInfo();
  assert.equal(p.language, 'Lua 5.3');
  assert.match(p.constraints, /^- /);
});

test('sync and async tools; thrown errors are catchable; arities; module; ctx', async () => {
  const seen = [];
  const tools = {
    Weather: {
      __module: 'MyApp.Weather',
      get: { fn: async (city, ctx) => { seen.push(ctx); await new Promise((r) => setTimeout(r, 5)); return { temp: 21, city }; }, arities: [1] },
      fail: () => { throw new Error('no such city'); },
      none: () => undefined,
    },
    Docs: { __module: 'MyApp.Docs' },
  };
  const r = await client.execute(`
    local w = Weather.get('Paris')
    local ok, err = pcall(Weather.fail)
    local ok2, err2 = pcall(Weather.get, 1, 2)
    return w.temp, w.city, ok, err, err2, Weather.none() == nil, Weather.__module, Docs.__module`, { tools });
  assert.deepEqual(r.value, [21, 'Paris', false, 'Weather.fail: no such city',
    'Weather.get takes 1 argument(s), got 2', true, 'MyApp.Weather', 'MyApp.Docs']);
  assert.equal(r.stats.tool_calls, 3);
  assert.equal(seen[0].tool, 'Weather');
  assert.equal(seen[0].function, 'get');
  assert.equal(seen[0].module, 'MyApp.Weather');
  assert.equal(typeof seen[0].executionId, 'number');
  assert.ok(seen[0].signal.aborted, 'the tool signal is aborted once the execution ended');
});

test('a class instance contributes its methods', async () => {
  class Counter {
    constructor() { this.n = 0; }
    add(k) { this.n += k; return this.n; }
    _hidden() { return 1; }
  }
  const c = new Counter();
  const r = await client.execute('Counter.add(2); return Counter.add(3), Counter._hidden', { tools: { Counter: c } });
  assert.deepEqual(r.value, [5, null]);
  assert.equal(c.n, 5);
});

test('ToolAbort ends the execution with ToolAborted, cause kept', async () => {
  const stop = new ToolAbort('user said stop');
  await assert.rejects(client.execute("print('asking'); pcall(Shell.run, 'rm'); return 'not reached'",
    { tools: { Shell: { run: () => { throw stop; } } } }), (e) => {
    assert.ok(e instanceof ToolAborted);
    assert.equal(e.kind, 'tool_aborted');
    assert.equal(e.output, 'asking\n');
    assert.equal(e.stats.tool_calls, 1);
    assert.equal(e.cause, stop);
    return true;
  });
});

test('concurrent executions on one connection, tool calls answered out of order', async () => {
  let releaseA;
  const aWaits = new Promise((r) => { releaseA = r; });
  const order = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const tools = {
    KV: {
      get: async (k) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (k === 'a') await aWaits; // answered only after b's call was answered
        order.push(k);
        inFlight--;
        if (k === 'b') releaseA();
        return `value of ${k}`;
      },
    },
  };
  const a = client.execute("return KV.get('a')", { tools });
  await until(() => inFlight === 1, undefined, "a's tool call");
  const b = client.execute("return KV.get('b')", { tools });
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(ra.value, 'value of a');
  assert.equal(rb.value, 'value of b');
  assert.deepEqual(order, ['b', 'a']);
  assert.equal(maxInFlight, 2);
  // and many at once
  const many = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    client.execute(`local s = 0 for j = 1, 5 do s = s + T.f(${i}) end return s`,
      { tools: { T: { f: async (x) => { await new Promise((r) => setTimeout(r, Math.random() * 5)); return x; } } } })));
  assert.deepEqual(many.map((r) => r.value), Array.from({ length: 20 }, (_, i) => 5 * i));
});

test('AbortSignal cancels: $/cancelRequest sent, the tool signal aborted, worker freed', async () => {
  const ac = new AbortController();
  let toolSignal;
  const p = client.execute("print('started'); return Slow.wait()", {
    signal: ac.signal,
    tools: {
      Slow: {
        wait: (ctx) => new Promise((resolve, reject) => {
          toolSignal = ctx.signal;
          ctx.signal.addEventListener('abort', () => reject(new Error('aborted')));
        }),
      },
    },
  });
  await until(() => toolSignal, undefined, 'the tool call');
  ac.abort(new Error('caller gave up'));
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof Cancelled);
    assert.equal(e.kind, 'cancelled');
    // output and stats come from the daemon's -32800 answer to $/cancelRequest
    assert.equal(e.output, 'started\n');
    assert.equal(e.stats.tool_calls, 1);
    assert.equal(e.cause.message, 'caller gave up');
    return true;
  });
  // answered by the cancel, not by a timeout: the daemon's -32800 answer
  // (its output and stats, checked above) to the $/cancelRequest
  assert.ok(toolSignal.aborted);
  await until(async () => (await workers()) === 0, undefined, 'the worker to be gone');

  // a pure-Lua loop, and a signal already aborted
  const ac2 = new AbortController();
  const p2 = client.execute('while true do end', { signal: ac2.signal });
  setTimeout(() => ac2.abort(), 100);
  await assert.rejects(p2, Cancelled);
  await assert.rejects(client.execute('return 1', { signal: AbortSignal.abort() }), Cancelled);
  await until(async () => (await workers()) === 0, undefined, 'the worker to be gone');
});

test('errors carry kind, code, output, stats, line', async () => {
  await assert.rejects(client.execute("print('before')\nlocal t = nil\nreturn t.x"), (e) => {
    assert.ok(e instanceof LuaError && e instanceof SandboxdError);
    assert.equal(e.kind, 'runtime_error');
    assert.equal(e.code, -32002);
    assert.equal(e.output, 'before\n');
    assert.equal(e.line, 3);
    assert.match(e.traceback, /stack traceback/);
    assert.equal(typeof e.stats.wall_us, 'number');
    assert.equal(e.retryable, false);
    return true;
  });
  await assert.rejects(client.execute('x = 1\nx'), (e) => e instanceof LuaError && e.kind === 'syntax_error' && e.line === 2);
  await assert.rejects(client.execute('local t = {} for i = 1, 1e9 do t[i] = i end', { limits: { max_heap: 1000000 } }),
    (e) => e instanceof LimitExceeded && e.kind === 'memory_limit' && e.stats !== null);
  await assert.rejects(client.execute('while true do end', { timeoutMs: 100 }),
    (e) => e instanceof LimitExceeded && e.kind === 'timeout' && !e.data.client_deadline);
  await assert.rejects(client.execute('return 1', { timeoutMs: 10 ** 9 }),
    (e) => e instanceof InvalidRequest && e.kind === 'limit_out_of_range');
  await assert.rejects(client.execute('return 1', { tools: { T: { f: 5 } } }), TypeError);
});

test('outgoing size guard: an oversized tool answer is a catchable Lua error', async () => {
  const max = (await client.describe()).daemon.max_message_bytes;
  const r = await client.execute(`
    local ok, err = pcall(Big.get)
    local small = Big.small()
    return ok, err, small`, {
    tools: { Big: { get: () => 'x'.repeat(max + 10), small: () => 'fine' } },
  });
  assert.equal(r.value[0], false);
  assert.match(r.value[1], /^Big\.get: the result of Big\.get is \d+ bytes of JSON, over the daemon's message limit of \d+ bytes$/);
  assert.equal(r.value[2], 'fine');
  // a request over the limit is refused before it is sent (it would never be answered)
  await assert.rejects(client.execute('return 1', { bindings: [['s', 'y'.repeat(max)]] }),
    (e) => e instanceof InvalidRequest && e.kind === 'message_too_large');
  assert.deepEqual(await client.ping(), {});
});

test('values JSON cannot carry become tool errors; BigInt within int64 is exact', async () => {
  const r = await client.execute(`
    local a, ea = pcall(V.nan)
    local c, ec = pcall(V.cycle)
    local b = V.big()
    return a, ea, c, ec, b == 1152921504606846977, math.type(b)`, {
    tools: {
      V: {
        nan: () => NaN,
        cycle: () => { const o = {}; o.self = o; return o; },
        big: () => 1152921504606846977n,
      },
    },
  });
  assert.equal(r.value[0], false);
  assert.match(r.value[1], /NaN cannot be sent as JSON/);
  assert.equal(r.value[2], false);
  assert.match(r.value[3], /cycle/);
  assert.deepEqual(r.value.slice(4), [true, 'integer']);
});

test('non-UTF-8 bytes and lone surrogates', async () => {
  let arg;
  const r = await client.execute(`
    s = 'caf\\xe9'
    local got = T.echo(s)
    local lone = T.lone()
    return s, got, lone == utf8.char(0xFFFD) .. 'x', #lone`, {
    tools: { T: { echo: (x) => { arg = x; return x; }, lone: () => '\ud800x' } },
  });
  assert.equal(arg, 'caf\ufffd');
  assert.deepEqual(r.value, ['caf\ufffd', 'caf\ufffd', true, 4]);
  // the bindings keep the real bytes
  const r2 = await client.execute("return s == 'caf\\xe9', #s", { bindings: r.bindings });
  assert.deepEqual(r2.value, [true, 4]);
  // a code string with a lone surrogate still parses on the daemon's side
  const r3 = await client.execute("return '\ud800'");
  assert.equal(r3.value, '\ufffd');
  // escaped backslashes before "ud800" are text, not escapes
  const r4 = await client.execute('return T.f()', { tools: { T: { f: () => '\\ud800' } } });
  assert.equal(r4.value, '\\ud800');
});

test('lines over 64 KiB both ways', async () => {
  const big = 'é'.repeat(150000); // 300 KB of UTF-8, characters split across reads
  let got;
  const r = await client.execute(`
    local s = T.get()
    T.put(s .. s)
    return #s, string.rep('ab', 250000)`, {
    tools: { T: { get: () => big, put: (s) => { got = s; return true; } } },
  });
  assert.equal(r.value[0], 300000);
  assert.equal(r.value[1].length, 500000);
  assert.equal(got, big + big);
  const code = `return ${'1 + '.repeat(15000)}1`; // ~60 KB of code
  assert.equal((await client.execute(code)).value, 15001);
});

test('many executions with many calls, some cancelled midway: no cross-talk, nothing left waiting', async () => {
  const n = 24;
  const runs = Array.from({ length: n }, (_, i) => {
    const ac = new AbortController();
    let calls = 0;
    const tools = {
      T: {
        tag: async (j, ctx) => {
          calls++;
          if (i % 4 === 0 && calls === 5) ac.abort();
          await new Promise((r) => setTimeout(r, Math.random() * 3));
          return `${i}:${j}:${ctx.executionId}`;
        },
      },
    };
    const p = client.execute(`
      local out = {}
      for j = 1, 15 do out[j] = T.tag(j) end
      return out`, { tools, signal: ac.signal });
    return { i, p, ac };
  });
  const results = await Promise.allSettled(runs.map((r) => r.p));
  results.forEach((res, i) => {
    if (i % 4 === 0) {
      assert.equal(res.status, 'rejected');
      assert.equal(res.reason.kind, 'cancelled');
    } else {
      assert.equal(res.status, 'fulfilled', String(res.reason));
      const ids = new Set(res.value.value.map((s) => s.split(':')[2]));
      assert.equal(ids.size, 1, 'every call came from one execution');
      assert.deepEqual(res.value.value.map((s) => s.split(':').slice(0, 2).join(':')),
        Array.from({ length: 15 }, (_, j) => `${i}:${j + 1}`));
    }
  });
  const conn = await client._connection();
  assert.equal(conn.pending.size, 0);
  await until(async () => (await workers()) === 0, undefined, 'every worker to be gone');
});
