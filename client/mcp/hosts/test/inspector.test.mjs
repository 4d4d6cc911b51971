// The MCP Inspector's CLI (`npx @modelcontextprotocol/inspector --cli`) as the
// host: it prints the whole tools/call result (content, structuredContent,
// isError), so it shows everything the bridge sends.  Its own --config
// option takes the bridge's unless `--` comes before the bridge's command,
// or the bridge is named in a host config (--config FILE --server NAME).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setup, SCALE, BRIDGE, MCP, TOY, until, REFUSED } from './setup.mjs';

const INSPECTOR = path.join(path.dirname(fileURLToPath(import.meta.url)),
  '..', 'node_modules', '@modelcontextprotocol', 'inspector', 'cli', 'build', 'cli.js');
const README = fs.readFileSync(path.join(MCP, 'README.md'), 'utf8');
const EVERYTHING = path.join(MCP, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');

let env;
let servers;    // servers.json of the README's commands: the toy server and everything
let hostJson;   // the README's host config block, its paths put in place

before(async () => {
  env = await setup('inspector');
  servers = path.join(env.dir, 'readme-servers.json');
  fs.writeFileSync(servers, JSON.stringify({ mcpServers: {
    toy: { command: process.execPath, args: [TOY, 'inspector'] },
    everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
  } }));
  const block = /```json\n(\{\n  "mcpServers": \{\n    "sandboxd"[\s\S]*?)```/.exec(README)[1];
  hostJson = path.join(env.dir, 'host.json');
  fs.writeFileSync(hostJson, block.replace('/path/to/sandboxd/client/mcp/', `${MCP}/`)
    .replace('/path/to/servers.json', servers).replace('/run/sandboxd/sandboxd.sock', env.daemon.socketPath));
});

after(async () => {
  await env?.stop();
});

/**
 * The README's Inspector commands (its ```sh blocks under "Under the MCP
 * Inspector", and the form in the prose that fails), each as the argv to
 * run: `npx @modelcontextprotocol/inspector` is the Inspector installed
 * here, `node` this node, sandboxd-mcp.js the bridge, servers.json and
 * host.json the files above; after `--` the bridge also gets the daemon's
 * socket.  readme.test.mjs in client/mcp checks that this suite reads them.
 */
function readmeCommands() {
  const text = README.replace(/\\\n\s*/g, '').replace(/`npx @modelcontextprotocol\/inspector ([^`]*)`/g,
    (m) => m.replace(/\s+/g, ' '));
  const cmds = [...text.matchAll(/^`?(npx @modelcontextprotocol\/inspector [^`\n]*)`?/gm)].map((m) => m[1]);
  const prose = /`(npx @modelcontextprotocol\/inspector --cli node [^`]*)`/.exec(text)[1];
  return [...cmds, prose].map((cmd) => {
    assert.ok(!/["\\$]/.test(cmd), cmd);
    const words = [...cmd.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]);
    assert.deepEqual(words.slice(0, 2), ['npx', '@modelcontextprotocol/inspector']);
    const argv = words.slice(2).map((w) => ({
      node: process.execPath, 'sandboxd-mcp.js': BRIDGE, 'servers.json': servers, 'host.json': hostJson,
    })[w] ?? w);
    if (argv.includes('--')) argv.push('--socket', env.daemon.socketPath);
    return { cmd, argv };
  });
}

function inspector(args) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [INSPECTOR, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (x) => { out += x; });
    c.stderr.on('data', (x) => { err += x; });
    const t = setTimeout(() => c.kill('SIGKILL'), 60000 * SCALE);
    c.on('exit', (status) => {
      clearTimeout(t);
      resolve({ status, out, err });
    });
  });
}

const json = (r) => {
  assert.equal(r.status, 0, `exit ${r.status}: ${r.err}${r.out}`);
  return JSON.parse(r.out);
};

test("the README's commands: `--` before node, then --tool-arg before --method", async () => {
  const cmds = readmeCommands();
  assert.equal(cmds.length, 4, cmds.map((c) => c.cmd).join('\n'));
  const [list, call] = cmds;
  const tools = json(await inspector(list.argv));
  assert.deepEqual(tools.tools.map((t) => t.name), ['execute_lua']);
  assert.match(tools.tools[0].description, /toy\.slow\(\{ms\?: number\}\)/);
  // --tool-arg takes several values: given last, it would take the bridge's command too
  const r = json(await inspector(call.argv));
  assert.equal(r.structuredContent.value, 'The sum of 1 and 2 is 3.');
  assert.equal(r.content[0].text, '"The sum of 1 and 2 is 3."');
  assert.equal(r.isError, undefined);
});

// The README's host config form, its code replaced by one that fails.
test('a host config (--config FILE --server NAME): isError and structuredContent both shown', async () => {
  const [, , hostCall] = readmeCommands();
  const r = json(await inspector(hostCall.argv.map((a) => (a.startsWith('code=') ? "code=print('before') error('boom')" : a))));
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.kind, 'runtime_error');
  assert.match(r.content[0].text, /^error \(runtime_error\): input:1: boom\n\nprinted before the error:\nbefore\n/);
});

test("without `--` the Inspector's own --config takes the bridge's (the README's failing form)", async () => {
  const { cmd, argv } = readmeCommands()[3];
  assert.ok(!argv.includes('--'), cmd);
  const r = await inspector([...argv, '--method', 'tools/list']);
  assert.notEqual(r.status, 0);
  assert.match(r.err + r.out, /Both --config and --server must be provided together/);
});

test('an unknown tool name: a JSON-RPC error -32602, which the Inspector reports as a failure', async () => {
  const r = await inspector(['--cli', '--method', 'tools/call', '--tool-name', 'nope', '--', process.execPath, ...env.bridgeArgs()]);
  assert.notEqual(r.status, 0);
  assert.match(r.err + r.out, /-32602.*unknown tool "nope" \(this server has only execute_lua\)/);
});

// The Inspector's CLI on a URL: Streamable HTTP (it picks it for a path /mcp).
test('over HTTP (--http): the Inspector CLI calls execute_lua at the URL', async () => {
  const child = spawn(process.execPath, [...env.bridgeArgs(['--http', '127.0.0.1:0'])], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (x) => { err += x; });
  try {
    await until(() => / at (http\S+)/.test(err) || child.exitCode !== null, 60000 * SCALE, 'the bridge to listen');
    const url = / at (http\S+)/.exec(err)[1];
    const r = json(await inspector(['--cli', url, '--method', 'tools/call', '--tool-name', 'execute_lua',
      '--tool-arg', 'code=return toy.pid().pid > 0']));
    assert.deepEqual([r.structuredContent.value, r.content[0].text], [true, 'true']);
    // the Inspector's CLI declares no elicitation: a call that needs confirmation is refused
    const e = json(await inspector(['--cli', url, '--method', 'tools/call', '--tool-name', 'execute_lua',
      '--tool-arg', 'code=return toy.env({name = "HOME"})']));
    assert.equal(e.isError, true);
    assert.equal(e.content[0].text.split('\n')[0], REFUSED);
    assert.equal(e.structuredContent.error.kind, 'runtime_error');
  } finally {
    child.kill('SIGTERM');
  }
});
