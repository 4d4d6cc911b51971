// The runnable examples work against the real daemon (the README's example:
// readme.test.mjs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startDaemon } from './daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..');
const run = promisify(execFile);

// The environment of a child whose stdout the test reads.  That stdout is a
// pipe, so the child prints no colour codes unless told to: when its own
// output is a terminal, node --test starts each test file with FORCE_COLOR=1,
// which a child would inherit and console.log obey ('\x1b[33m7\x1b[39m').
// terminal.test.mjs runs this file under a pseudo-terminal.
function pipedEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.FORCE_COLOR;
  return env;
}

test('examples/node-agent.mjs runs its three turns', async () => {
  const d = await startDaemon();
  try {
    const { stdout } = await run(process.execPath, [path.join(REPO, 'examples', 'node-agent.mjs')],
      { env: pipedEnv({ SANDBOXD_SOCKET: d.socketPath }) });
    assert.match(stdout, /^turn 1: error \(syntax_error\)/m);
    assert.match(stdout, /^turn 2: value 2; 3 tool calls; globals open; printed: skipped: Orders.list: no customer carl$/m);
    const turn3 = /^turn 3: value (\{.*\}); 2 tool calls/m.exec(stdout); // key order is Lua's
    assert.ok(turn3, stdout);
    assert.deepEqual(JSON.parse(turn3[1]), { total: 115, open_orders: 2 });
    assert.match(stdout, /^drafts: ann@example.com: Order 2; bob@example.com: Order 3$/m);
  } finally {
    await d.stop();
  }
});

test('an idle client does not keep the process alive (no close() needed)', async () => {
  const d = await startDaemon();
  const script = `import { Client } from ${JSON.stringify(path.join(HERE, '..', 'src', 'index.js'))};
    const c = new Client({ socketPath: ${JSON.stringify(d.socketPath)} });
    console.log((await c.execute('return T.f()', { tools: { T: { f: () => 7 } } })).value);`;
  const file = path.join(d.dir, 'noclose.mjs');
  fs.writeFileSync(file, script);
  try {
    // a client that kept it alive would be killed here: 60 s, a bound on the
    // exit that a start under load (2 s at a load average of 20) stays far from
    const { stdout } = await run(process.execPath, [file], { timeout: 60000, env: pipedEnv() });
    assert.equal(stdout, '7\n');
  } finally {
    await d.stop();
  }
});
