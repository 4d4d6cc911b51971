// sandboxd-mcp end to end: the SDK's Client over stdio spawns the bridge,
// which spawns @modelcontextprotocol/server-everything,
// @modelcontextprotocol/server-filesystem (rooted in a temporary directory)
// and a small fixture server as its downstream servers, and runs Lua in the
// real daemon.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Sandboxd } from 'sandboxd';
import { startDaemon, until, SCALE } from '../../node/test/daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.resolve(HERE, '..');
const BIN = path.join(PKG, 'bin', 'sandboxd-mcp.js');
const MODS = path.join(PKG, 'node_modules', '@modelcontextprotocol');
const EVERYTHING = path.join(MODS, 'server-everything', 'dist', 'index.js');
const FILESYSTEM = path.join(MODS, 'server-filesystem', 'dist', 'index.js');
const TOY = path.join(HERE, 'fixtures', 'toy-server.mjs');

let d;
let sbx;
let tmp;
let root;
let marker;

/** Start a bridge on `servers` under the SDK's Client; returns { host, stderr, close }. */
async function startBridge(servers, extraArgs = []) {
  const cfg = path.join(tmp, `servers-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: servers }));
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, '--config', cfg, '--socket', d.socketPath, ...extraArgs],
    env: { BRIDGE_SECRET: 'must not leak' },
    stderr: 'pipe',
  });
  const b = { stderr: '', listChanged: 0 };
  transport.stderr.on('data', (c) => { b.stderr += c; });
  b.host = new Client({ name: 'test-host', version: '1.0.0' });
  b.host.setNotificationHandler(ToolListChangedNotificationSchema, () => { b.listChanged++; });
  await b.host.connect(transport);
  b.pid = transport.pid;
  b.lua = async (code, opts = {}) => b.host.callTool({ name: 'execute_lua', arguments: { code, ...opts.args } },
    undefined, { signal: opts.signal, timeout: 30000 * SCALE });
  b.description = async () => (await b.host.listTools()).tools[0].description;
  return b;
}

const everything = { command: process.execPath, args: [EVERYTHING, 'stdio'], deny: ['get-env'] };
let bridge;

// The bound on a bridge (node loading the MCP SDK, node servers under it)
// starting or stopping, as the SDK's host waits for its initialize answer:
// under load that takes seconds, and a wait for it ends
// as soon as it is done.
const LIFE_MS = 60000 * SCALE;

before(async () => {
  d = await startDaemon();
  sbx = new Sandboxd({ socketPath: d.socketPath });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxmcp-'));
  root = path.join(tmp, 'root');
  fs.mkdirSync(root);
  for (const [n, v] of [['a.txt', 5], ['b.txt', 7], ['c.txt', 30]]) fs.writeFileSync(path.join(root, n), `${v}\n`);
  fs.writeFileSync(path.join(root, 'big.txt'), 'q'.repeat(1200000));
  marker = `toy-marker-${process.pid}`;
  bridge = await startBridge({
    everything,
    filesystem: { command: process.execPath, args: [FILESYSTEM, root] },
    toy: { command: process.execPath, args: [TOY, marker], env: { TOY_SECRET: 'from-config' } },
    '2-toy lite': { command: process.execPath, args: [TOY, marker], allow: ['pid', 'json-text'] },
    broken: { command: path.join(tmp, 'no-such-server') },
  }, ['--catalog-chars', '100000']);
});

after(async () => {
  await bridge?.host.close().catch(() => {});
  sbx.close();
  await d.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const value = (r) => {
  assert.ok(!r.isError, `execute_lua failed: ${r.content?.[0]?.text}`);
  return r.structuredContent.value;
};

test('one tool, execute_lua, whose description has prompt_info, the catalog and the mappings', async () => {
  const { tools } = await bridge.host.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['execute_lua']);
  assert.deepEqual(tools[0].inputSchema.required, ['code']);
  const desc = tools[0].description;
  assert.match(desc, /Lua 5\.3/);
  assert.match(desc, /Not available: `io`/); // from the daemon's prompt_info
  assert.match(desc, /everything\.get_sum\(\{a: number, b: number\}\) \[MCP tool "get-sum"\]/);
  assert.match(desc, /filesystem\.read_text_file\(\{path: string/);
  assert.match(desc, /### _2_toy_lite \(MCP server "2-toy lite"\)/);
  assert.match(desc, /toy\.json_text\(\{\}\) \[MCP tool "json-text"\]/);
  assert.match(desc, /toy\.add_tool/); // listed across pages (3 tools a page)
  assert.doesNotMatch(desc, /get_env/); // deny
  assert.doesNotMatch(desc, /_2_toy_lite\.fail/); // allow
  assert.match(desc, /## Servers not available\n- broken: failed to start: /);
  assert.match(bridge.stderr, /server "broken" failed to start: .*left out/);
  // server-everything announces a change before the host is connected: not sent, and no stderr noise
  assert.doesNotMatch(bridge.stderr, /Not connected|list_changed/);
  assert.match(desc, /Your calls share one Lua session: globals, functions, closures and tables with metatables persist/);
  assert.doesNotMatch(desc, /Tools are global tables; call them as `Name\.fn\(\.\.\.\)` with positional/);
});

test('Lua loops over filesystem tools and sums with get_sum', async () => {
  const r = await bridge.lua(`
    local listing = filesystem.list_directory({path = ${JSON.stringify(root)}}).content
    local total, files = 0, {}
    for name in listing:gmatch('%[FILE%] (%S+%.txt)') do
      if name ~= 'big.txt' then
        local n = tonumber(filesystem.read_text_file({path = ${JSON.stringify(root)} .. '/' .. name}).content)
        local text = everything.get_sum({a = total, b = n})
        total = tonumber(text:match('is (%-?%d+)'))
        files[#files + 1] = name
      end
    end
    print('files: ' .. table.concat(files, ' '))
    return {total = total, files = #files}`);
  assert.deepEqual(value(r), { total: 42, files: 3 });
  assert.equal(r.structuredContent.output, 'files: a.txt b.txt c.txt\n');
  assert.match(r.content[0].text, /"total": 42/);
});

test('a downstream validation error, isError, and a non-table argument are catchable Lua errors', async () => {
  const v = value(await bridge.lua(`
    local ok1, e1 = pcall(everything.get_sum, {a = 'one', b = 2})
    local ok2, e2 = pcall(toy.fail)
    local ok3, e3 = pcall(everything.get_sum, 5)
    local ok4, e4 = pcall(everything.get_sum, {1, 2})
    local ok5, e5 = pcall(everything.get_sum, {a = 1}, {b = 2})
    local ok6, e6 = pcall(filesystem.read_text_file, {path = '/etc/passwd'})
    return {ok1, e1, ok2, e2, ok3, e3, ok4, e4, ok5, e5, ok6, e6}`));
  assert.equal(v[0], false);
  assert.match(v[1], /^everything\.get_sum: MCP error -32602: /);
  assert.equal(v[2], false);
  assert.equal(v[3], 'toy.fail: it failed');
  assert.equal(v[5], 'everything.get_sum: takes one table argument with named fields, got a number');
  assert.equal(v[7], 'everything.get_sum: takes a table with named fields, not a list');
  assert.equal(v[9], 'everything.get_sum: takes one table argument, got 2 arguments');
  assert.equal(v[10], false);
  assert.match(v[11], /^filesystem\.read_text_file: .*(denied|outside)/i);
});

test('results: structuredContent, JSON text decoded, plain text; env scoped to the config', async () => {
  const v = value(await bridge.lua(`
    local w = everything.get_structured_content({location = 'Chicago'})
    local j = toy.json_text()
    return {type(w.temperature), j.a[2], everything.echo({message = 'hi'}),
            toy.env({name = 'TOY_SECRET'}), toy.env({name = 'BRIDGE_SECRET'}) == nil,
            _2_toy_lite.pid().pid ~= toy.pid().pid}`));
  assert.deepEqual(v, ['number', 2.5, 'Echo: hi', 'from-config', true, true]);
});

test('an unknown tool name is a JSON-RPC error -32602, not a tool result', async () => {
  await assert.rejects(bridge.host.callTool({ name: 'execute_python', arguments: { code: '1' } }),
    (e) => e.code === -32602 && /unknown tool "execute_python" \(this server has only execute_lua\)/.test(e.message));
  assert.equal(value(await bridge.lua('return 1')), 1);
});

test('a Lua error is an isError result with kind, message and output', async () => {
  const r = await bridge.lua("print('so far'); error('boom')");
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.kind, 'runtime_error');
  assert.match(r.structuredContent.error.message, /boom/);
  assert.equal(r.structuredContent.output, 'so far\n');
  assert.match(r.content[0].text, /^error \(runtime_error\)/);
  const r2 = await bridge.host.callTool({ name: 'execute_lua', arguments: { code: 5 } });
  assert.equal(r2.isError, true);
});

test('globals persist between calls; reset clears them', async () => {
  value(await bridge.lua('counter = 41'));
  assert.equal(value(await bridge.lua('counter = counter + 1; return counter')), 42);
  const r = await bridge.lua('return counter', { args: { reset: true } });
  assert.equal(value(r), null);
});

test('one daemon session: functions, closures and metatables survive between calls', async () => {
  value(await bridge.lua(`
    function double(x) return 2 * x end
    local n = 0
    function counter() n = n + 1 return n end
    Vec = setmetatable({}, {__index = function(_, k) return 'field ' .. k end})
    tally = {a = 1}`, { args: { reset: true } }));
  const r = await bridge.lua('counter() return {double(21), counter(), Vec.x, tally.a}');
  assert.deepEqual(value(r), [42, 2, 'field x', 1]);
  assert.deepEqual(r.structuredContent.binding_names, ['Vec', 'tally']); // the data globals saved
  // a runtime error keeps the state as the chunk left it
  const e = await bridge.lua("tally.b = 2 error('boom')");
  assert.equal(e.structuredContent.error.kind, 'runtime_error');
  assert.match(e.content[0].text, /The Lua state is kept as the chunk left it/);
  assert.deepEqual(value(await bridge.lua('return {tally.b, counter()}')), [2, 3]);
  // reset drops functions too
  const g = await bridge.lua('return type(double)', { args: { reset: true } });
  assert.equal(value(g), 'nil');
});

test('a session that ends is reopened: by a limit, by its idle timeout; the model is told each time', async () => {
  const b = await startBridge({ toy: { command: process.execPath, args: [TOY, 'ends'] } },
    ['--timeout-ms', String(1000 * SCALE), '--idle-timeout-ms', String(400 * SCALE)]);
  try {
    value(await b.lua("function helper() return 'h' end saved = {1, 2, 3}"));
    const t = await b.lua('while true do end');
    assert.equal(t.structuredContent.error.kind, 'timeout');
    assert.match(t.content[0].text, /This error ended the Lua session, so its functions and globals are gone: the next call starts from the data globals saved after the last call \(saved\); functions, closures and metatables must be defined again/);
    const r = await b.lua('return {#saved, type(helper)}');
    assert.deepEqual(value(r), [3, 'nil']);
    assert.doesNotMatch(r.content[0].text, /reset/); // told already, with the error
    value(await b.lua("function helper() return 'again' end more = 1"));
    await new Promise((res) => setTimeout(res, 900 * SCALE)); // past the idle timeout
    const i = await b.lua('return {#saved, more, type(helper)}');
    assert.deepEqual(value(i), [3, 1, 'nil']);
    assert.match(i.content[0].text, /^Note: the Lua state was reset before this call \(the session had ended: idle for more than \d+ ms, or the daemon restarted\); it starts from the data globals saved after the last call \(more, saved\)/);
  } finally {
    await b.host.close();
  }
});

test('without sessions (--no-sessions, or none free), data globals persist through bindings', async () => {
  const b = await startBridge({}, ['--no-sessions']);
  try {
    assert.match(await b.description(), /Global variables persist between execute_lua calls \(data only/);
    value(await b.lua('function f() return 1 end kept = 5'));
    assert.deepEqual(value(await b.lua('return {kept, type(f)}')), [5, 'nil']);
  } finally {
    await b.host.close();
  }
  // a daemon whose sessions are all taken: the call runs without one, and says so once
  const full = await startDaemon({ daemon: { max_sessions: 1 } });
  const holder = new Sandboxd({ socketPath: full.socketPath });
  const cfg = path.join(tmp, 'full.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: {} }));
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, '--config', cfg, '--socket', full.socketPath], stderr: 'pipe' });
  const host = new Client({ name: 'h', version: '1' });
  try {
    const taken = await holder.session();
    await host.connect(transport);
    const call = (code) => host.callTool({ name: 'execute_lua', arguments: { code } });
    const r = await call('function f() end kept = 6');
    assert.match(r.content[0].text, /^Note: every session of the daemon is in use, so this call ran without one/);
    const r2 = await call('return {kept, type(f)}');
    assert.deepEqual(value(r2), [6, 'nil']);
    assert.doesNotMatch(r2.content[0].text, /Note/);
    await taken.close();
    const r3 = await call('function f() end return kept');
    assert.equal(value(r3), 6);
    assert.match(r3.content[0].text, /^Note: this call ran in a Lua session again/);
    assert.equal(value(await call('return type(f)')), 'function');
  } finally {
    await host.close();
    holder.close();
    await full.stop();
  }
});

test('execute_lua calls run one at a time, in the order they arrive', async () => {
  const first = bridge.lua("toy.slow({ms = 300}); order = (order or '') .. 'a'; return order", { args: { reset: true } });
  await new Promise((r) => setTimeout(r, 50));
  const second = bridge.lua("order = (order or '') .. 'b'; return order");
  const [a, b] = await Promise.all([first, second]);
  assert.equal(value(a), 'a');
  assert.equal(value(b), 'ab');
});

test('progress: with a progress token, each downstream call sends notifications/progress', async () => {
  // The SDK's Client handles a response at once but a notification a
  // microtask later, so a progress notification read together with the
  // response is dropped (its handler is gone): the last call here is slow.
  const seen = [];
  const code = 'toy.pid() local s = everything.get_sum({a = 1, b = 1}) toy.slow({ms = 100}) return s';
  const r = await bridge.host.callTool({ name: 'execute_lua', arguments: { code } },
    undefined, { onprogress: (p) => seen.push(p), timeout: 30000 * SCALE });
  assert.equal(value(r), 'The sum of 1 and 1 is 2.');
  assert.deepEqual(seen.map((p) => [p.progress, p.message]),
    [[1, 'calling toy.pid'], [2, 'calling everything.get_sum'], [3, 'calling toy.slow']], JSON.stringify(seen));
});

test('progress: what the chunk prints reaches the host while it runs, rate-limited and bounded', async (t) => {
  if (!(await sbx.features()).has('stream_output')) {
    t.skip('daemon without the "stream_output" feature');
    return;
  }
  const seen = [];
  const t0 = Date.now();
  // "first", a pause, then a burst of 20,000 lines (108,894 chars), then a slow call (see above)
  const code = `print('first') local t = os.clock() while os.clock() - t < 0.6 do end
    for i = 1, 20000 do print(i) end toy.slow({ms = 300}) return 1`;
  const r = await bridge.host.callTool({ name: 'execute_lua', arguments: { code } },
    undefined, { onprogress: (p) => seen.push({ ...p, at: Date.now() - t0 }), timeout: 30000 * SCALE });
  assert.equal(value(r), 1);
  const printed = seen.filter((p) => p.message.startsWith('printed'));
  assert.equal(printed[0].message, 'printed:\nfirst\n');
  assert.ok(printed[0].at + 300 <= printed[1].at, JSON.stringify(printed.map((p) => p.at))); // sent during the pause
  assert.ok(seen.every((p, i) => p.progress === i + 1));
  assert.equal(seen.at(-1).message, 'calling toy.slow');
  // at most one per 250 ms, each at most 2,000 chars of output (and its header), 64 KiB in all
  assert.ok(printed.length <= 2 + Math.ceil((seen.at(-1).at - printed[0].at) / 250), JSON.stringify(seen.map((p) => p.at)));
  for (const p of printed.slice(1)) assert.match(p.message, /^printed \([\d,]+ chars before this not shown\):\n\d+\n|^printed:\n/);
  assert.ok(printed.every((p) => p.message.length <= 2000 + 60));
  assert.match(printed.at(-1).message, /\n20000\n$/); // the last of the burst
  assert.equal(r.structuredContent.output_truncated, true); // the result keeps its bound
});

test('parallel over downstream tools (when the daemon has it)', async (t) => {
  if (!(await sbx.features()).has('parallel')) {
    t.skip('daemon without the "parallel" feature');
    return;
  }
  const v = value(await bridge.lua(`
    return {parallel(function() return toy.slow({ms = 200}) end,
                     function() return everything.get_sum({a = 2, b = 3}) end,
                     function() return toy.pid().pid end)}`));
  assert.equal(v[0], 'slept');
  assert.equal(v[1], 'The sum of 2 and 3 is 5.');
  assert.equal(typeof v[2], 'number');
});

test('an oversized downstream result is a catchable Lua error', async () => {
  const v = value(await bridge.lua(`
    local ok, err = pcall(toy.big, {n = 2000000})
    local ok2, err2 = pcall(filesystem.read_text_file, {path = ${JSON.stringify(root)} .. '/big.txt'})
    return {ok, err, ok2, err2, #toy.big({n = 300000})}`));
  assert.equal(v[0], false);
  assert.match(v[1], /^toy\.big: the result of toy\.big is \d+ bytes of JSON, over the daemon's message limit/);
  assert.equal(v[2], false);
  assert.match(v[3], /over the daemon's message limit/);
  assert.equal(v[4], 300000);
});

/** How many executions the daemon's log says were cancelled. */
const cancelled = () => (d.log().match(/ outcome=cancelled /g) || []).length;

test('the host cancels a long execution; the worker is freed', async () => {
  for (const code of [
    'return everything.trigger_long_running_operation({duration = 30, steps = 30})',
    'return toy.slow({ms = 30000})',
    'while true do end',
  ]) {
    const ac = new AbortController();
    const p = bridge.lua(code, { signal: ac.signal });
    await until(async () => (await sbx.describe()).state.workers >= 1, undefined, 'the execution to start');
    await new Promise((r) => setTimeout(r, 200));
    const before = cancelled();
    ac.abort();
    await assert.rejects(p);
    // freed by the cancel (the daemon's log says so), not by the end of the
    // call (30 s) or of its timeout (55 s): the waits are safety nets only
    await until(() => cancelled() === before + 1, 60000 * SCALE, 'the execution to be cancelled');
    await until(async () => (await sbx.describe()).state.workers === 0, 60000 * SCALE, 'the worker to be freed');
  }
  // the bridge still serves
  assert.equal(value(await bridge.lua('return 1 + 1')), 2);
});

test('--max-result-chars bounds text and structuredContent together, with the cut said and flagged', async () => {
  const b = await startBridge({}, ['--max-result-chars', '400']);
  // what the widest host (LangChain) shows the model: the text block with structuredContent, as JSON
  const size = (r) => JSON.stringify({ type: 'text', text: r.content[0].text, structuredContent: r.structuredContent }).length;
  try {
    // the case: 2.2 MB printed, the daemon keeps 1 MiB, the host gets 400 characters
    const r = await b.lua('for i=1,200000 do print(string.rep("y",10)) end return 1');
    const text = r.content[0].text;
    assert.ok(size(r) <= 400, `${size(r)} characters`);
    assert.match(text, /^1\n\nprinted:\n[y\n]+\[output cut: 1,048,576 chars \(the daemon's max_output_bytes reached\), first \d+ shown; print less\]$/);
    assert.equal(r.structuredContent.value, 1);
    assert.equal(r.structuredContent.truncated, true);
    assert.equal(r.structuredContent.output_truncated, true);
    assert.equal(r.structuredContent.value_truncated, false);
    assert.equal(r.structuredContent.output, text.split('\n\nprinted:\n')[1].split('\n[output cut')[0]);
    // a value over the bound: cut, said, flagged
    const v = await b.lua('return string.rep("x", 5000)');
    assert.ok(size(v) <= 400);
    assert.match(v.content[0].text, /^"x+\n\[value cut: 5,002 chars of JSON, first \d+ shown; return less\]$/);
    assert.equal(v.structuredContent.value, null);
    assert.equal(v.structuredContent.value_truncated, true);
    // the neighbour that fits is not cut: 120 characters, in the text and in structuredContent
    const fit = await b.lua('return string.rep("x", 118)');
    assert.ok(size(fit) <= 400);
    assert.equal(fit.structuredContent.truncated, false);
    assert.equal(fit.structuredContent.value, 'x'.repeat(118));
    assert.equal(fit.content[0].text, JSON.stringify('x'.repeat(118)));
    // a failure is bounded too, its message first
    const f = await b.lua("print(string.rep('o', 3000)) error(string.rep('m', 3000))");
    assert.equal(f.isError, true);
    assert.ok(size(f) <= 400, `${size(f)}`);
    assert.match(f.content[0].text, /^error \(runtime_error\): input:1: m+ \[message cut\]\n\n\[3,001 chars of output not shown\]\n\ntool calls made: 0\n\nThe Lua state is kept as the chunk left it/);
    assert.equal(f.structuredContent.truncated, true);
  } finally {
    await b.host.close();
  }
});

test('the catalog keeps to its budget; mcp.tools and mcp.help give the rest', async () => {
  const b = await startBridge({
    everything,
    filesystem: { command: process.execPath, args: [FILESYSTEM, root] },
    toy: { command: process.execPath, args: [TOY, 'budget'] },
  }, ['--catalog-chars', '1200']);
  try {
    const desc = await b.description();
    const catalog = desc.slice(desc.indexOf('## Tools\n\n') + 10);
    assert.ok(catalog.length <= 1200, `${catalog.length} characters`);
    assert.match(desc, /`return mcp\.tools\(\)` lists every tool .*\(the catalog below is abridged\)/);
    const v = value(await b.lua(`
      local all, toys = mcp.tools(), mcp.tools('toy')
      local h = mcp.help('everything.get_sum')
      local s = mcp.help('toy')
      local ok, err = pcall(mcp.help, 'nope.nothing')
      return {#all, #toys, toys[1], h.name, h.mcp_name, h.call, h.description, h.arguments.required, #s.tools, ok, err}`));
    assert.ok(v[0] >= 30, `${v[0]} tools`);
    assert.equal(v[1], 9);
    assert.equal(v[2], 'toy.pid({}) -- The process id of this server');
    assert.deepEqual(v.slice(3, 7), ['everything.get_sum', 'get-sum', 'everything.get_sum({a: number, b: number})', 'Returns the sum of two numbers']);
    assert.deepEqual(v[7], ['a', 'b']);
    assert.equal(v[8], 9);
    assert.equal(v[9], false);
    assert.match(v[10], /^mcp\.help: no tool or server named "nope\.nothing"; mcp\.tools\(\) lists every tool/);
  } finally {
    await b.host.close();
  }
});

test('tools/list_changed downstream: the bridge re-lists and tells the host', async () => {
  assert.doesNotMatch(await bridge.description(), /toy\.extra/);
  // other servers may send list_changed too (server-everything does): wait
  // for the one that brings toy.extra
  const seen = bridge.listChanged;
  value(await bridge.lua('return toy.add_tool()'));
  await until(async () => bridge.listChanged > seen && /toy\.extra\(\{\}\) -- Added later/.test(await bridge.description()),
    undefined, 'notifications/tools/list_changed with toy.extra');
  assert.equal(value(await bridge.lua('return toy.extra()')), 'extra works');
});

test('finished downstream calls are not cancelled when the execution ends', async () => {
  const before = value(await bridge.lua('for i = 1, 5 do toy.pid() end return toy.cancels()'));
  const after = value(await bridge.lua('return toy.cancels()'));
  assert.equal(after, before);
});

test('a downstream server that dies mid-call: a catchable error, the rest keeps working', async () => {
  const v = value(await bridge.lua(`
    local ok, err = pcall(toy.die)
    local ok2, err2 = pcall(toy.pid)
    return {ok, err, ok2, err2, everything.get_sum({a = 1, b = 2})}`));
  assert.equal(v[0], false);
  assert.match(v[1], /^toy\.die: server "toy" exited during the call/);
  assert.equal(v[2], false);
  assert.match(v[3], /^toy\.pid: server "toy" is not running/);
  assert.equal(v[4], 'The sum of 1 and 2 is 3.');
  assert.match(await bridge.description(), /### toy\n\(not running: the server exited\)/);
});

/**
 * A host that speaks JSON-RPC on the bridge's stdio itself and, like the AI
 * SDK's MCP client, can give up on a call without notifications/cancelled.
 */
async function rawBridge(servers, extraArgs = []) {
  const cfg = path.join(tmp, `raw-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: servers }));
  const child = spawn(process.execPath, [BIN, '--config', cfg, '--socket', d.socketPath, ...extraArgs],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  const waiting = new Map();
  let buf = '';
  child.stdout.on('data', (c) => {
    buf += c;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const m = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (m.id !== undefined && waiting.has(m.id)) waiting.get(m.id)(m);
    }
  });
  let id = 0;
  const send = (m) => child.stdin.write(`${JSON.stringify(m)}\n`);
  const request = (method, params) => {
    const me = ++id;
    const p = new Promise((r) => waiting.set(me, r));
    send({ jsonrpc: '2.0', id: me, method, params });
    return p;
  };
  await request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return {
    call: (args) => request('tools/call', { name: 'execute_lua', arguments: args }),
    close: () => { child.stdin.end(); return new Promise((r) => child.once('exit', r)); },
  };
}

test('a host that abandons a call: the next call waits at most --queue-wait-ms, then interrupt runs it', async () => {
  const raw = await rawBridge({ toy: { command: process.execPath, args: [TOY, 'raw'] } },
    ['--queue-wait-ms', String(500 * SCALE), '--timeout-ms', String(20000 * SCALE)]);
  try {
    assert.equal((await raw.call({ code: 'kept = 1 function f() return 2 end return 1' })).result.structuredContent.value, 1);
    const abandoned = raw.call({ code: 'return toy.slow({ms = 15000})' }); // its host never waits for it
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    const busy = (await raw.call({ code: 'return kept' })).result;
    const waited = Date.now() - t0;
    assert.equal(busy.isError, true);
    assert.equal(busy.structuredContent.error.kind, 'busy');
    // not before --queue-wait-ms; how much later a loaded machine makes it is
    // not asserted: `busy` itself says the earlier call (15 s) still ran
    assert.ok(waited >= 450 * SCALE, `waited ${waited} ms`);
    assert.match(busy.content[0].text, /^error \(busy\): not run: an earlier execute_lua call has been running for \d+\.\d s and this one waited \d+\.\d s \(calls run one at a time\)\. If that call was abandoned .* call again with `interrupt = true`/);
    // the interrupt ran it at once: the abandoned call (15 s) ends `cancelled`
    // by this one, below, not by its own end
    const r = (await raw.call({ code: 'return {kept, type(f)}', interrupt: true })).result;
    // the interrupted chunk ended its session; the data globals came back, the function did not
    assert.deepEqual(r.structuredContent.value, [1, 'nil']);
    const gone = (await abandoned).result;
    assert.equal(gone.structuredContent.error.kind, 'cancelled');
    assert.match(gone.content[0].text, /cancelled by a later execute_lua call with interrupt = true[\s\S]*This error ended the Lua session/);
    // calls that arrive while one runs briefly still queue and all run, in order
    const q = [raw.call({ code: "toy.slow({ms = 200}) seq = 'a' return seq" }),
      raw.call({ code: "seq = seq .. 'b' return seq" }), raw.call({ code: "seq = seq .. 'c' return seq" })];
    assert.deepEqual((await Promise.all(q)).map((m) => m.result.structuredContent.value), ['a', 'ab', 'abc']);
  } finally {
    await raw.close();
  }
});

function procsWith(text) {
  const out = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(text)) out.push(Number(p));
    } catch {
      // gone
    }
  }
  return out;
}

test('the downstream servers stop with the bridge', async () => {
  const own = `stop-marker-${process.pid}`;
  const b = await startBridge({
    toy: { command: process.execPath, args: [TOY, own] },
    filesystem: { command: process.execPath, args: [FILESYSTEM, root, own] },
  });
  try {
    assert.equal(procsWith(own).length, 2);
    value(await b.lua('return toy.pid()'));
  } finally {
    await b.host.close();
  }
  await until(() => procsWith(own).length === 0, LIFE_MS, 'the downstream servers to exit');
  await until(() => !fs.existsSync(`/proc/${b.pid}`) || /Z/.test(fs.readFileSync(`/proc/${b.pid}/stat`, 'utf8').split(') ')[1][0]),
    LIFE_MS, 'the bridge to exit');
});

test('the bridge exits, stopping its servers, when the host closes its stdin', async () => {
  const own = `eof-marker-${process.pid}`;
  const cfg = path.join(tmp, 'eof.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: { toy: { command: process.execPath, args: [TOY, own] } } }));
  const child = spawn(process.execPath, [BIN, '--config', cfg, '--socket', d.socketPath], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  try { // a bridge left running keeps this file's process, and node --test, waiting
    await until(() => /serving execute_lua/.test(stderr) || exited(), LIFE_MS, 'the bridge to serve');
    assert.ok(!exited(), `the bridge exited before serving: ${stderr}`);
    assert.equal(procsWith(own).length, 1);
    child.stdin.end(); // no signal: only the end of its input
    await until(exited, LIFE_MS, 'the bridge to exit');
  } finally {
    child.kill('SIGKILL');
  }
  assert.deepEqual([child.exitCode, child.signalCode], [0, null]);
  await until(() => procsWith(own).length === 0, LIFE_MS, 'the downstream server to exit');
});

test('the bridge stops its servers on SIGTERM too', async () => {
  const own = `term-marker-${process.pid}`;
  const b = await startBridge({ toy: { command: process.execPath, args: [TOY, own] } });
  try {
    assert.equal(procsWith(own).length, 1);
    process.kill(b.pid, 'SIGTERM');
    await until(() => procsWith(own).length === 0, LIFE_MS, 'the downstream server to exit');
  } finally {
    await b.host.close().catch(() => {});
  }
});

test('the daemon down: execute_lua answers daemon_unavailable naming --socket, nothing hangs', async () => {
  const dead = path.join(tmp, 'dead.sock');
  const cfg = path.join(tmp, 'solo.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: { toy: { command: process.execPath, args: [TOY, 'solo'] } } }));
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, '--config', cfg, '--socket', dead], stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (c) => { stderr += c; });
  const host = new Client({ name: 'h', version: '1' });
  await host.connect(transport);
  try {
    const r = await host.callTool({ name: 'execute_lua', arguments: { code: 'return 1' } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.error.kind, 'daemon_unavailable');
    assert.match(r.content[0].text, /cannot connect to sandboxd at .*dead\.sock: ENOENT: is sandboxd running\? Start it, or give sandboxd-mcp its socket with --socket PATH\./);
    assert.doesNotMatch(r.content[0].text, /SANDBOXD_SOCKET or socketPath/);
    assert.match(stderr, /sandboxd: cannot connect.*--socket PATH/);
  } finally {
    await host.close();
  }
});

test('command-line and config errors: a clear message on stderr and a non-zero exit', async () => {
  const bad = path.join(tmp, 'bad.json');
  fs.writeFileSync(bad, '{"servers": {}}');
  const broken = path.join(tmp, 'broken.json');
  fs.writeFileSync(broken, '{not json');
  const good = path.join(tmp, 'empty.json');
  fs.writeFileSync(good, '{"mcpServers": {}}');
  for (const [args, code, rx] of [
    [[], 2, /--config is required/],
    [['--config', bad], 1, /no "mcpServers" object/],
    [['--config', broken], 1, /cannot read .*broken\.json/],
    [['--config', path.join(tmp, 'missing.json')], 1, /cannot read/],
    [['--config', good, '--priority', 'urgent'], 2, /--priority takes low, normal or high/],
    [['--config', good, '--timeout-ms', 'soon'], 2, /--timeout-ms needs a number/],
    [['--config', good, '--max-result-chars', '399'], 2, /--max-result-chars must be at least 400/],
    [['--bogus'], 2, /unknown argument "--bogus"/],
  ]) {
    const r = await new Promise((resolve) => {
      const c = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let err = '';
      let out = '';
      c.stderr.on('data', (x) => { err += x; });
      c.stdout.on('data', (x) => { out += x; });
      c.on('exit', (status) => resolve({ status, err, out }));
    });
    assert.equal(r.status, code, `${args.join(' ')}: ${r.err}`);
    assert.match(r.err, rx);
    assert.equal(r.out, '', 'nothing on stdout (the protocol channel)');
  }
});

test("a timeout or priority above the daemon's ceiling is lowered to it", async () => {
  const low = await startDaemon({ defaults: { timeout_ms: 1000, priority: 'low' }, ceilings: { timeout_ms: 3000, priority: 'normal' } });
  const cfg = path.join(tmp, 'low.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: {} }));
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, '--config', cfg, '--socket', low.socketPath, '--priority', 'high'], stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (c) => { stderr += c; });
  const host = new Client({ name: 'h', version: '1' });
  try {
    await host.connect(transport);
    const r = await host.callTool({ name: 'execute_lua', arguments: { code: 'return 1' } });
    assert.equal(value(r), 1);
    assert.match(stderr, /timeout 55000 ms is above the daemon's ceiling; using 3000 ms/);
    assert.match(stderr, /priority high is above the daemon's ceiling; using normal/);
    const t = await host.callTool({ name: 'execute_lua', arguments: { code: 'while true do end' } });
    assert.equal(t.structuredContent.error.kind, 'timeout');
  } finally {
    await host.close();
    await low.stop();
  }
});

test('the daemon restarted under the bridge: the running call fails clearly, the next one works', async () => {
  const dd = await startDaemon();
  const cfg = path.join(tmp, 'restart.json');
  fs.writeFileSync(cfg, JSON.stringify({ mcpServers: { toy: { command: process.execPath, args: [TOY, 'restart'] } } }));
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, '--config', cfg, '--socket', dd.socketPath], stderr: 'pipe' });
  const host = new Client({ name: 'h', version: '1' });
  try {
    await host.connect(transport);
    assert.equal(value(await host.callTool({ name: 'execute_lua', arguments: { code: 'kept = 7 return 1' } })), 1);
    const running = host.callTool({ name: 'execute_lua', arguments: { code: 'return toy.slow({ms = 20000})' } });
    const watcher = new Sandboxd({ socketPath: dd.socketPath });
    await until(async () => (await watcher.describe()).state.workers >= 1, undefined, 'the execution to start');
    watcher.close();
    await dd.kill();
    const r = await running;
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.error.kind, 'daemon_unavailable');
    assert.match(r.content[0].text, /This error ended the Lua session/);
    fs.rmSync(dd.socketPath, { force: true });
    await dd.start();
    const again = await host.callTool({ name: 'execute_lua', arguments: { code: 'return kept' } });
    assert.equal(value(again), 7); // the data globals saved after the last call
    // restarted while idle: found at the next call, which runs in a new session and says so
    await dd.kill();
    fs.rmSync(dd.socketPath, { force: true });
    await dd.start();
    const idle = await host.callTool({ name: 'execute_lua', arguments: { code: 'return kept' } });
    assert.equal(value(idle), 7);
    assert.match(idle.content[0].text, /^Note: the Lua state was reset before this call \(the session had ended: idle for more than .*, or the daemon restarted\)/);
  } finally {
    await host.close();
    await dd.stop();
  }
});
