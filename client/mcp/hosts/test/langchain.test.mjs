// LangChain as the host: @langchain/mcp-adapters' MultiServerMCPClient over
// stdio, its tool run the way an agent runs it (a tool call in, a
// ToolMessage out, through LangGraph's ToolNode).  What the model reads is
// the ToolMessage's content: on success the text block with the
// structuredContent appended as JSON (so the bridge bounds both together);
// an isError result becomes a ToolException whose message is the text, which
// ToolNode turns into an error ToolMessage.  An aborted call sends
// notifications/cancelled (the MCP SDK's client), so the bridge cancels it
// and the next call runs at once.

import { test as nodeTest, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import { AIMessage } from '@langchain/core/messages';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { setup, SCALE, REFUSED } from './setup.mjs';

// @langchain/core 1.4 and @langchain/mcp-adapters 1.1 need Node >= 20 (20.10):
// under Node 18 they fail on the global `crypto`, so there the suite is skipped.
const TOO_OLD = Number(process.versions.node.split('.')[0]) < 20
  && `LangChain needs Node >= 20, this is ${process.version}`;
const test = (name, fn) => nodeTest(name, { skip: TOO_OLD }, fn);

let env;
let client;
let tool;
let node;
let n = 0;

before(async () => {
  if (TOO_OLD) return;
  env = await setup('langchain');
  client = new MultiServerMCPClient({
    mcpServers: { sandboxd: { transport: 'stdio', command: process.execPath, args: env.bridgeArgs(['--max-result-chars', '2000']) } },
  });
  [tool] = await client.getTools();
  node = new ToolNode([tool]);
});

after(async () => {
  await client?.close();
  await env?.stop();
});

/** Run one execute_lua call as an agent would; the ToolMessage the model reads. */
async function agentCall(args) {
  const id = `call${++n}`;
  const out = await node.invoke({ messages: [new AIMessage({ content: '', tool_calls: [{ id, name: tool.name, args }] })] });
  const m = out.messages.at(-1);
  assert.equal(m.tool_call_id, id);
  return m;
}

test('the tools: execute_lua with its description and input schema', async () => {
  assert.equal(tool.name, 'execute_lua');
  assert.match(tool.description, /toy\.slow\(\{ms\?: number\}\)/);
});

test('success: the model reads the text and the structuredContent, within the bound together', async () => {
  const m = await agentCall({ code: 'function f(x) return x * 2 end return {answer = f(21)}', reset: true });
  assert.equal(m.status, 'success');
  const block = JSON.parse(m.content);
  assert.equal(block.text, '{\n "answer": 42\n}');
  assert.deepEqual(block.structuredContent.value, { answer: 42 });
  assert.deepEqual(m.artifact, [{ type: 'mcp_structured_content', data: block.structuredContent }]);
  // the session kept f
  const again = JSON.parse((await agentCall({ code: 'return f(1)' })).content);
  assert.equal(again.text, '2');
  // a big result: everything the model reads stays within --max-result-chars 2000
  const big = await agentCall({ code: "for i = 1, 500 do print('line ' .. i) end return string.rep('v', 5000)" });
  const b = JSON.parse(big.content);
  assert.ok(big.content.length <= 2000, `${big.content.length}`);
  assert.match(b.text, /\[value cut: 5,002 chars of JSON, first \d+ shown; return less\]/);
  assert.equal(b.structuredContent.truncated, true);
});

test('isError: a ToolException whose message is the text; ToolNode gives the model an error message', async () => {
  const m = await agentCall({ code: "print('partial') error('boom')" });
  assert.equal(m.status, 'error');
  assert.match(m.content, /MCP tool 'execute_lua' on server 'sandboxd' returned an error: error \(runtime_error\): input:1: boom\n\nprinted before the error:\npartial\n/);
  assert.doesNotMatch(m.content, /structuredContent/);
});

test('an aborted call is cancelled in the bridge (notifications/cancelled): the next call runs at once', async () => {
  const ac = new AbortController();
  const slow = tool.invoke({ code: 'return toy.slow({ms = 20000})' }, { signal: ac.signal });
  setTimeout(() => ac.abort(), 300);
  await assert.rejects(slow);
  const t0 = Date.now();
  const m = await agentCall({ code: 'return 7' });
  const text = JSON.parse(m.content).text;
  // the cancelled chunk ended the session, and the host ignored its answer: this call says so
  assert.match(text, /^Note: the Lua state was reset before this call \(the host cancelled the call before this one, which ended the Lua session\)/);
  assert.match(text, /\n\n7$/);
  assert.ok(Date.now() - t0 < 3000 * SCALE, `${Date.now() - t0} ms`);
});

test('a call that needs confirmation: LangChain declares no elicitation, so it is refused; an error ToolMessage', async () => {
  const m = await agentCall({ code: 'return toy.env({name = "HOME"})' });
  assert.equal(m.status, 'error');
  assert.equal(m.content.split('\n')[0], `Error: MCP tool 'execute_lua' on server 'sandboxd' returned an error: ${REFUSED}`);
});
