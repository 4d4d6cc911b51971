// Confirmation before downstream calls (--confirm, a server's "confirm"):
// the bridge asks the host's user through elicitation/create, and the chunk
// waits.  Hosts are the SDK's Client with and without the elicitation
// capability, over stdio and over Streamable HTTP; the downstream server is
// the real @modelcontextprotocol/server-filesystem, whose write_file is
// annotated destructive and read_text_file read-only, so each answer is seen
// in the file system: accepted, the file is written; otherwise not.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startDaemon, until, SCALE } from '../../node/test/daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(HERE, '..', 'bin', 'sandboxd-mcp.js');
const FILESYSTEM = path.join(HERE, '..', 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const TOY = path.join(HERE, 'fixtures', 'toy-server.mjs');

let d;
let tmp;
let root;
let servers;

before(async () => {
  d = await startDaemon();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxmcp-confirm-'));
  root = fs.realpathSync(tmp);
  servers = path.join(tmp, 'servers.json');
  fs.writeFileSync(servers, JSON.stringify({ mcpServers: {
    files: { command: process.execPath, args: [FILESYSTEM, root] },
    // unannotated: under --confirm destructive each tool would ask, but its own list says which do
    toy: { command: process.execPath, args: [TOY, 'confirm'], confirm: ['env'] },
  } }));
});

after(async () => {
  await d.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A host with the elicitation capability whose user answers with `answer()` (or never, for 'hang'). */
function asking(host, answer) {
  const asked = [];
  host.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    const a = answer();
    if (a === 'hang') return new Promise(() => {});
    return a === 'accept' ? { action: 'accept', content: {} } : { action: a };
  });
  return asked;
}

async function stdioHost(args, capabilities) {
  const transport = new StdioClientTransport({
    command: process.execPath, args: [BIN, '--config', servers, '--socket', d.socketPath, ...args], stderr: 'pipe',
  });
  const host = new Client({ name: 'confirm-host', version: '1.0.0' }, { capabilities });
  return { host, transport };
}

const lua = (host, code) => host.callTool({ name: 'execute_lua', arguments: { code } }, undefined, { timeout: 30000 * SCALE });
const write = (name) => `return files.write_file({path = ${JSON.stringify(path.join(root, name))}, content = "hi"})`;
const exists = (name) => fs.existsSync(path.join(root, name));

test('--confirm destructive: accept runs the call, decline and cancel are Lua errors, reads never ask', async () => {
  const { host, transport } = await stdioHost(['--confirm', 'destructive'], { elicitation: {} });
  let answer = 'accept';
  const asked = asking(host, () => answer);
  await host.connect(transport);
  try {
    const desc = (await host.listTools()).tools[0].description;
    assert.match(desc, /files\.write_file\(\{path: string, content: string\}\) \[destructive, idempotent, asks the user\]/);
    assert.match(desc, /files\.read_text_file\(\{path: string, tail\?: number, head\?: number\}\) \[read-only\] --/);
    assert.match(desc, /toy\.pid\(\{\}\) --/); // not in its server's list: not marked
    assert.match(desc, /toy\.env\(\{name\?: string\}\) \[asks the user\]/);
    assert.match(desc, /A tool marked `asks the user` runs only once the user accepts the call/);

    const r = await lua(host, `${write('accepted.txt').replace('return ', 'local w = ')} return {w, files.read_text_file({path = ${JSON.stringify(path.join(root, 'accepted.txt'))}})}`);
    assert.ok(!r.isError, r.content[0].text);
    assert.ok(exists('accepted.txt'));
    assert.equal(asked.length, 1); // the read did not ask
    assert.equal(asked[0].mode, 'form');
    assert.deepEqual(asked[0].requestedSchema, { type: 'object', properties: {} });
    assert.equal(asked[0].message, 'Allow this tool call? Code run by execute_lua (sandboxd-mcp) wants to call the tool ' +
      '"write_file" of the MCP server "files" (files.write_file in Lua); the bridge asks because the tool is marked ' +
      `destructive.\nArguments:\n{\n "content": "hi",\n "path": ${JSON.stringify(path.join(root, 'accepted.txt'))}\n}\n` +
      'Accept runs the call; decline refuses it, and the code gets an error.');

    answer = 'decline';
    const declined = await lua(host, write('declined.txt'));
    assert.equal(declined.isError, true);
    assert.equal(declined.structuredContent.error.kind, 'runtime_error');
    assert.match(declined.content[0].text, /^error \(runtime_error\): files\.write_file: not run: the user declined this call \(asked because the tool is marked destructive\)/);
    assert.ok(!exists('declined.txt'));
    // pcall catches it, so the chunk can go on
    const caught = await lua(host, `local ok, err = pcall(function() ${write('declined.txt')} end) return {ok, err}`);
    assert.deepEqual(caught.structuredContent.value, [false, 'files.write_file: not run: the user declined this call (asked because the tool is marked destructive)']);

    answer = 'cancel';
    const cancelled = await lua(host, write('cancelled.txt'));
    assert.match(cancelled.content[0].text, /^error \(runtime_error\): files\.write_file: not run: the user dismissed the confirmation without accepting \(asked because the tool is marked destructive\)/);
    assert.ok(!exists('cancelled.txt'));

    // a server's list overrides --confirm: it asks for the listed tool only
    answer = 'decline';
    const n = asked.length;
    const l = await lua(host, 'return {toy.pid().pid > 0, pcall(toy.env, {name = "HOME"})}');
    assert.deepEqual(l.structuredContent.value, [true, false, 'toy.env: not run: the user declined this call (asked because its server\'s "confirm" list names it)']);
    assert.equal(asked.length, n + 1);
  } finally {
    await host.close();
  }
});

test('a host without elicitation, --without-elicitation allow: the call runs, and the result says so', async () => {
  const { host, transport } = await stdioHost(['--confirm', 'destructive', '--without-elicitation', 'allow'], {});
  await host.connect(transport);
  try {
    await host.listTools();
    const r = await lua(host, write('allow.txt'));
    assert.ok(!r.isError, r.content[0].text);
    assert.ok(exists('allow.txt'));
    assert.deepEqual(r.structuredContent.notes, ["Note: files.write_file ran without the user's confirmation (the tool is " +
      'marked destructive): this MCP host cannot ask its user, and the bridge is set to allow such calls.']);
    assert.match(r.content[0].text, /^Note: files\.write_file ran without the user's confirmation/);
  } finally {
    await host.close();
  }
});

// Three MCP sessions of one bridge: each question goes to its own host.
test("over Streamable HTTP, per MCP session: asked on the call's stream; a host that cannot ask is refused; the chunk's timeout bounds the wait", async () => {
  const child = spawn(process.execPath, [BIN, '--config', servers, '--socket', d.socketPath, '--http', '127.0.0.1:0',
    '--confirm', 'destructive', '--timeout-ms', String(3000 * SCALE)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const hosts = [];
  const connect = async (capabilities, answer) => {
    const host = new Client({ name: 'http-host', version: '1.0.0' }, { capabilities });
    const asked = answer ? asking(host, answer) : [];
    await host.connect(new StreamableHTTPClientTransport(new URL(url)));
    hosts.push(host);
    return { host, asked };
  };
  let url;
  try {
    await until(() => /at (http\S+)/.test(stderr) || child.exitCode !== null, 60000 * SCALE, 'the bridge to listen');
    url = /at (http\S+)/.exec(stderr)[1];
    const answers = ['accept', 'decline'];
    const a = await connect({ elicitation: {} }, () => answers.shift());
    const silent = await connect({ elicitation: {} }, () => 'hang');
    const none = await connect({});
    const ok = await lua(a.host, write('http-accepted.txt'));
    assert.ok(!ok.isError, ok.content[0].text);
    const no = await lua(a.host, write('http-declined.txt'));
    assert.match(no.content[0].text, /files\.write_file: not run: the user declined this call/);
    // the user never answers: the chunk ends at its timeout
    const t0 = Date.now();
    const t = await lua(silent.host, write('never.txt'));
    assert.equal(t.structuredContent.error.kind, 'timeout', t.content[0].text);
    assert.ok(Date.now() - t0 < 3000 * SCALE + 5000, `${Date.now() - t0} ms`);
    // the default fallback: refused
    const r = await lua(none.host, write('refused.txt'));
    assert.equal(r.content[0].text.split('\n')[0], 'error (runtime_error): files.write_file: not run: this call needs the ' +
      "user's confirmation (the tool is marked destructive), and this MCP host cannot ask for it (it has no elicitation)");
    assert.deepEqual(['http-accepted.txt', 'http-declined.txt', 'never.txt', 'refused.txt'].map(exists), [true, false, false, false]);
    assert.deepEqual([a.asked.length, silent.asked.length], [2, 1]);
  } finally {
    await Promise.allSettled(hosts.map((h) => h.close()));
    child.kill('SIGTERM');
  }
});
