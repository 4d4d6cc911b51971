// The Vercel AI SDK as the host: @ai-sdk/mcp's client over stdio, its tools
// in generateText, streamText and a ToolLoopAgent, with a mock model
// (ai/test) that plays a scripted conversation and records what it is shown.
// The AI SDK gives the model the text content of a result only: isError and
// structuredContent are dropped, so the text says `error (kind): ...`.  On
// abort its client rejects locally and sends no notifications/cancelled, so
// the bridge still runs the call: the next one waits at most --queue-wait-ms,
// answers busy, and `interrupt: true` runs it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, stepCountIs, ToolLoopAgent } from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { spawn } from 'node:child_process';
import { createMCPClient, ElicitationRequestSchema } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport as StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { setup, SCALE, until } from './setup.mjs';

let env;
let client;
let tools;

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const call = (id, args) => ({ type: 'tool-call', toolCallId: id, toolName: 'execute_lua', input: JSON.stringify(args) });
const step = (...content) => ({ content, finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] });
const say = (text) => ({ content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] });

/** A mock model that answers with `turns` in order and records every prompt. */
function scripted(turns) {
  const prompts = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (opts) => {
      prompts.push(opts.prompt);
      return turns.shift();
    },
  });
  return { model, prompts };
}

/** The tool results the model was shown in a prompt: [{toolCallId, output}]. */
const shown = (prompt) => prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content);

async function connect(extra = []) {
  return createMCPClient({
    transport: new StdioMCPTransport({ command: process.execPath, args: env.bridgeArgs(extra), stderr: 'ignore' }),
  });
}

before(async () => {
  env = await setup('ai-sdk');
  client = await connect(['--queue-wait-ms', String(1000 * SCALE)]);
  tools = await client.tools();
});

after(async () => {
  await client?.close();
  await env?.stop();
});

test('generateText: the session keeps a function between steps; the model sees the text only', async () => {
  assert.deepEqual(Object.keys(tools), ['execute_lua']);
  const { model, prompts } = scripted([
    step(call('c1', { code: 'function twice(x) return 2 * x end return twice(toy.pid().pid) > 0', reset: true })),
    step(call('c2', { code: 'return twice(21)' })),
    step(call('c3', { code: "print('partial') error('boom')" })),
    say('done'),
  ]);
  const r = await generateText({ model, tools, prompt: 'go', stopWhen: stepCountIs(6) });
  assert.equal(r.text, 'done');
  const results = shown(prompts[3]);
  assert.deepEqual(results.map((x) => x.toolCallId), ['c1', 'c2', 'c3']);
  assert.deepEqual(results[0].output, { type: 'content', value: [{ type: 'text', text: 'true' }] });
  assert.deepEqual(results[1].output, { type: 'content', value: [{ type: 'text', text: '42' }] });
  // isError does not reach the model: the text carries the kind, the output, and the state
  assert.equal(results[2].output.type, 'content');
  assert.match(results[2].output.value[0].text, /^error \(runtime_error\): input:1: boom\n\nprinted before the error:\npartial\n[\s\S]*The Lua state is kept as the chunk left it/);
  assert.doesNotMatch(JSON.stringify(results), /structuredContent|binding_names/);
});

test('streamText: a tool call streamed in, its result, and the final text', async () => {
  const streams = [
    [{ type: 'stream-start', warnings: [] },
      { type: 'tool-call', toolCallId: 's1', toolName: 'execute_lua', input: JSON.stringify({ code: 'return mcp.help("toy.slow").call' }) },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage }],
    [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'ok' },
      { type: 'text-end', id: 't' }, { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage }],
  ];
  const prompts = [];
  const model = new MockLanguageModelV3({
    doStream: async (opts) => {
      prompts.push(opts.prompt);
      return { stream: convertArrayToReadableStream(streams.shift()) };
    },
  });
  const r = streamText({ model, tools, prompt: 'go', stopWhen: stepCountIs(3) });
  assert.equal(await r.text, 'ok');
  const results = shown(prompts[1]);
  assert.deepEqual(results[0].output, { type: 'content', value: [{ type: 'text', text: '"toy.slow({ms?: number})"' }] });
});

test('a ToolLoopAgent: two calls in one step queue and both run; a limit resets the state, and the model is told', async () => {
  const { model, prompts } = scripted([
    step(call('a1', { code: "kept = 'data' function helper() return 'h' end return 1", reset: true }),
      call('a2', { code: 'return helper() .. kept' })),
    step(call('a3', { code: 'local t = {} for i = 1, 1e9 do t[i] = i end' })), // the heap limit
    step(call('a4', { code: 'return {kept, type(helper)}' })),
    say('finished'),
  ]);
  const agent = new ToolLoopAgent({ model, tools, stopWhen: stepCountIs(6) });
  const r = await agent.generate({ prompt: 'work' });
  assert.equal(r.text, 'finished');
  const all = shown(prompts[3]);
  const text = (id) => all.find((x) => x.toolCallId === id).output.value[0].text;
  assert.equal(text('a1'), '1\n\nglobals kept: kept');
  assert.equal(text('a2'), '"hdata"\n\nglobals kept: kept');
  assert.match(text('a3'), /^error \(memory_limit\): [\s\S]*This error ended the Lua session, so its functions and globals are gone: the next call starts from the data globals saved after the last call \(kept\)/);
  assert.equal(text('a4'), '[\n "data",\n "nil"\n]\n\nglobals kept: kept');
});

test('abort: the AI SDK gives up without notifications/cancelled; the next call is busy after --queue-wait-ms, then interrupt runs it', async () => {
  await tools.execute_lua.execute({ code: "kept = 'data'", reset: true }, { toolCallId: 'k0', messages: [] });
  const ac = new AbortController();
  const first = scripted([step(call('x1', { code: 'return toy.slow({ms = 20000})' })), say('never')]);
  const aborted = generateText({ model: first.model, tools, prompt: 'slow', abortSignal: ac.signal });
  setTimeout(() => ac.abort(), 300);
  // the AI SDK ends the step with a tool error of its own; the bridge is not told
  const r0 = await aborted;
  const err = r0.steps[0].content.find((p) => p.type === 'tool-error');
  assert.equal(err.error.message, 'Request was aborted');
  const t0 = Date.now();
  const next = scripted([
    step(call('y1', { code: 'return 1 + 1' })),
    step(call('y2', { code: 'return 1 + 1', interrupt: true })),
    say('recovered'),
  ]);
  const r = await generateText({ model: next.model, tools, prompt: 'again', stopWhen: stepCountIs(4) });
  const took = Date.now() - t0;
  assert.equal(r.text, 'recovered');
  const results = shown(next.prompts[2]);
  assert.match(results[0].output.value[0].text, /^error \(busy\): not run: an earlier execute_lua call has been running for [\d.]+ s .*`interrupt = true`/);
  // the interrupted call ended the session, and its result reached no model: this one says so
  assert.match(results[1].output.value[0].text, /^Note: the Lua state was reset before this call \(the call before this one was interrupted, which ended the Lua session\); it starts from the data globals saved after the last call \(kept\); functions, closures and metatables must be defined again\.\n\n2\n\nglobals kept: kept$/);
  // far less than the 20 s the abandoned call would have held the queue
  assert.ok(took < 8000 * SCALE, `took ${took} ms`);
});

// The AI SDK's client declares elicitation when the app asks it to, and hands
// elicitation/create to the app's handler (its user): here over HTTP (--http),
// calling toy.env, which its server's "confirm" list names.  Declined, the
// call does not run and the model reads the refusal as the chunk's error text.
test('over HTTP, with elicitation: the user declines, then accepts; the model reads the refusal', async () => {
  const child = spawn(process.execPath, [...env.bridgeArgs(['--http', '127.0.0.1:0'])],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (x) => { err += x; });
  let http;
  try {
    await until(() => / at (http\S+)/.test(err) || child.exitCode !== null, 60000 * SCALE, 'the bridge to listen');
    http = await createMCPClient({
      transport: { type: 'http', url: / at (http\S+)/.exec(err)[1] },
      capabilities: { elicitation: {} },
    });
    const answers = ['decline', 'accept'];
    const asked = [];
    http.onElicitationRequest(ElicitationRequestSchema, async (req) => {
      asked.push(req.params.message);
      const action = answers.shift();
      return action === 'accept' ? { action, content: {} } : { action };
    });
    const { model, prompts } = scripted([
      step(call('c1', { code: 'return type(toy.env({name = "HOME"}))' })),
      step(call('c2', { code: 'return type(toy.env({name = "HOME"}))' })),
      say('done'),
    ]);
    const r = await generateText({ model, tools: await http.tools(), prompt: 'go', stopWhen: stepCountIs(4) });
    assert.equal(r.text, 'done');
    const results = shown(prompts[2]);
    assert.equal(results[0].output.value[0].text.split('\n')[0],
      'error (runtime_error): toy.env: not run: the user declined this call (asked because its server\'s "confirm" list names it)');
    assert.deepEqual(results[1].output.value, [{ type: 'text', text: '"string"' }]);
    assert.equal(asked.length, 2);
    assert.match(asked[0], /^Allow this tool call\? .*the tool "env" of the MCP server "toy"/);
  } finally {
    await http?.close();
    child.kill('SIGTERM');
  }
});
