// The OpenAI Agents SDK as the host: MCPServerStdio, an Agent with a fake
// model (the SDK's Model interface, answering a scripted conversation and
// recording its input), run().  By default the model reads the text content
// of a result only: the function_call_result is "completed" even for an
// isError result, so the text says `error (kind): ...`.  With
// useStructuredContent the model reads structuredContent alone as JSON,
// which carries the value, the output and the bridge's notes.  A run's
// AbortSignal reaches the MCP SDK's client, which sends
// notifications/cancelled.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, run, MCPServerStdio, Usage, setTracingDisabled } from '@openai/agents';
import { setup, SCALE, REFUSED } from './setup.mjs';

setTracingDisabled(true);

let env;
let server;

// The SDK's own 5 s per request (clientSessionTimeoutSeconds) covers the
// bridge's start with its downstream servers, which a loaded machine can
// take longer for: the host's patience is not what this suite tests.
const bridge = () => ({ command: process.execPath, args: env.bridgeArgs(), clientSessionTimeoutSeconds: 120 * SCALE });

before(async () => {
  env = await setup('openai-agents');
  server = new MCPServerStdio({ name: 'sandboxd', ...bridge() });
  await server.connect();
});

after(async () => {
  await server?.close();
  await env?.stop();
});

const call = (id, args) => ({ type: 'function_call', callId: id, name: 'execute_lua', arguments: JSON.stringify(args), status: 'completed' });
const say = (text) => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] });

/**
 * A fake model answering `turns` (arrays of output items) in order, each
 * after `delay` ms; `inputs` records what it read.
 */
function fakeModel(turns, delay = 0) {
  const inputs = [];
  return {
    inputs,
    async getResponse(req) {
      inputs.push(req.input);
      if (delay) await new Promise((r) => setTimeout(r, delay));
      return { usage: new Usage(), output: turns.shift(), responseId: `r${inputs.length}` };
    },
    async *getStreamedResponse() {
      throw new Error('not used');
    },
  };
}

/** The function_call_result items the model read, by call id. */
function results(input) {
  const out = {};
  for (const item of input) if (item.type === 'function_call_result') out[item.callId] = item;
  return out;
}

test('a run: the session keeps a function; results and errors reach the model as text, isError dropped', async () => {
  const model = fakeModel([
    [call('c1', { code: 'function twice(x) return 2 * x end return twice(toy.pid().pid) > 0', reset: true })],
    [call('c2', { code: 'return {twice(21), mcp.tools("toy")[1]}' })],
    [call('c3', { code: "print('partial') error('boom')" })],
    [say('done')],
  ]);
  const agent = new Agent({ name: 'lua', instructions: 'Use execute_lua.', model, mcpServers: [server] });
  const r = await run(agent, 'go', { maxTurns: 6 });
  assert.equal(r.finalOutput, 'done');
  const seen = results(model.inputs[3]);
  assert.deepEqual(seen.c1.output, [{ type: 'input_text', text: 'true' }]);
  assert.deepEqual(seen.c2.output, [{ type: 'input_text', text: '[\n 42,\n "toy.pid({}) -- The process id of this server"\n]' }]);
  assert.equal(seen.c3.status, 'completed');
  assert.match(seen.c3.output[0].text, /^error \(runtime_error\): input:1: boom\n\nprinted before the error:\npartial\n[\s\S]*The Lua state is kept as the chunk left it/);
});

test('useStructuredContent: the model reads structuredContent alone, which carries the value, output and notes', async () => {
  const structured = new MCPServerStdio({ name: 'sandboxd-structured', ...bridge(), useStructuredContent: true });
  await structured.connect();
  try {
    const model = fakeModel([
      [call('s1', { code: "toy.add_tool() print('hi') return {n = 1}" })],
      [call('s2', { code: 'return toy.extra()' })], // after the tool list changed: a note
      [say('ok')],
    ], 500);
    const agent = new Agent({ name: 'lua', instructions: 'x', model, mcpServers: [structured] });
    await run(agent, 'go', { maxTurns: 4 });
    const seen = results(model.inputs[2]);
    const read = (item) => JSON.parse(typeof item.output === 'string' ? item.output : item.output.text ?? item.output[0].text);
    const s1 = read(seen.s1);
    assert.deepEqual([s1.value, s1.output, s1.truncated], [{ n: 1 }, 'hi\n', false]);
    const s2 = read(seen.s2);
    assert.equal(s2.value, 'extra works');
    assert.match(s2.notes[0], /^Note: the tool list changed, so the Lua session was reopened/);
  } finally {
    await structured.close();
  }
});

test('an aborted run cancels the call in the bridge (notifications/cancelled): the next run is not held', async () => {
  const ac = new AbortController();
  const slow = fakeModel([[call('x1', { code: 'return toy.slow({ms = 20000})' })], [say('never')]]);
  const agent = new Agent({ name: 'lua', instructions: 'x', model: slow, mcpServers: [server] });
  setTimeout(() => ac.abort(), 500);
  await assert.rejects(run(agent, 'slow', { signal: ac.signal }));
  const t0 = Date.now();
  const next = fakeModel([[call('y1', { code: 'return 5' })], [say('ok')]]);
  await run(new Agent({ name: 'lua', instructions: 'x', model: next, mcpServers: [server] }), 'again');
  const text = results(next.inputs[1]).y1.output[0].text;
  assert.match(text, /^Note: the Lua state was reset before this call \(the host cancelled the call before this one, which ended the Lua session\)[\s\S]*\n\n5$/);
  assert.ok(Date.now() - t0 < 3000 * SCALE, `${Date.now() - t0} ms`);
});

test('a call that needs confirmation: the Agents SDK declares no elicitation, so it is refused; the model reads the text', async () => {
  const model = fakeModel([[call('e1', { code: 'return toy.env({name = "HOME"})' })], [say('ok')]]);
  await run(new Agent({ name: 'lua', instructions: 'x', model, mcpServers: [server] }), 'go');
  const seen = results(model.inputs[1]).e1;
  assert.equal(seen.status, 'completed');
  assert.equal(seen.output[0].text.split('\n')[0], REFUSED);
});
