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
import { setup, SCALE } from './setup.mjs';

const INSPECTOR = path.join(path.dirname(fileURLToPath(import.meta.url)),
  '..', 'node_modules', '@modelcontextprotocol', 'inspector', 'cli', 'build', 'cli.js');

let env;

before(async () => {
  env = await setup('inspector');
});

after(async () => {
  await env?.stop();
});

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

test('`--` before node: tools/list, then tools/call with --tool-arg before --method', async () => {
  const list = json(await inspector(['--cli', '--method', 'tools/list', '--', process.execPath, ...env.bridgeArgs()]));
  assert.deepEqual(list.tools.map((t) => t.name), ['execute_lua']);
  assert.match(list.tools[0].description, /toy\.slow\(\{ms\?: number\}\)/);
  // --tool-arg takes several values: given last, it would take the bridge's command too
  const call = json(await inspector(['--cli', '--tool-arg', 'code=function f(x) return x * 2 end return {f(21), toy.pid().pid > 0}',
    '--method', 'tools/call', '--tool-name', 'execute_lua', '--', process.execPath, ...env.bridgeArgs()]));
  assert.deepEqual(call.structuredContent.value, [42, true]);
  assert.equal(call.content[0].text, '[\n 42,\n true\n]');
  assert.equal(call.isError, undefined);
});

test('a host config (--config FILE --server NAME): isError and structuredContent both shown', async () => {
  const host = path.join(env.dir, 'host.json');
  fs.writeFileSync(host, JSON.stringify({ mcpServers: { sandboxd: { command: process.execPath, args: env.bridgeArgs() } } }));
  const r = json(await inspector(['--cli', '--config', host, '--server', 'sandboxd', '--method', 'tools/call',
    '--tool-name', 'execute_lua', '--tool-arg', "code=print('before') error('boom')"]));
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.kind, 'runtime_error');
  assert.match(r.content[0].text, /^error \(runtime_error\): input:1: boom\n\nprinted before the error:\nbefore\n/);
});

test("without `--` the Inspector's own --config takes the bridge's (the clash the README explains)", async () => {
  const r = await inspector(['--cli', process.execPath, ...env.bridgeArgs(), '--method', 'tools/list']);
  assert.notEqual(r.status, 0);
  assert.match(r.err + r.out, /Both --config and --server must be provided together/);
});

test('an unknown tool name: a JSON-RPC error -32602, which the Inspector reports as a failure', async () => {
  const r = await inspector(['--cli', '--method', 'tools/call', '--tool-name', 'nope', '--', process.execPath, ...env.bridgeArgs()]);
  assert.notEqual(r.status, 0);
  assert.match(r.err + r.out, /-32602.*unknown tool "nope" \(this server has only execute_lua\)/);
});
