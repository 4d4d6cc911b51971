// Every block and command of this package's README, checked against the real
// daemon and this package: each fenced block and each command in backticks
// is claimed by a check here (or by the suite that runs it), so one added
// without a check fails this suite; the names of the API it lists exist.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startDaemon } from './daemon.mjs';
import { readme, claim, shLines } from './readme.mjs';
import * as sandboxd from '../src/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.resolve(HERE, '..');
const REPO = path.resolve(PKG, '..', '..');
const README = readme(path.join(PKG, 'README.md'));
const MAKEFILE = fs.readFileSync(path.join(REPO, 'Makefile'), 'utf8');
const run = promisify(execFile);

// The environment of a child whose stdout the test reads: no FORCE_COLOR,
// which node --test sets when its own output is a terminal (see
// terminal.test.mjs) and console.log would obey.
function pipedEnv() {
  const env = { ...process.env };
  delete env.FORCE_COLOR;
  return env;
}

/** The install line: the top README gives the same command, and tests/readme
 * runs it (offline, into a scratch project, then imports 'sandboxd'). */
function install(body) {
  assert.deepEqual(shLines(body), ['npm install ./client/node']);
  const top = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8').replace(/\s+/g, ' ');
  assert.ok(top.includes('`npm install ./client/node`'), 'the top README no longer gives it');
  const suite = fs.readFileSync(path.join(REPO, 'tests', 'readme', 'test_readme.py'), 'utf8');
  assert.match(suite, /"npm install \.\/client\/node": run_npm_install_node,/);
}

/** The example, run as written against a daemon on the socket it names:
 * it prints what its last comment says (after the tool's own line). */
async function example(body) {
  const want = /console\.log\(r\.value, r\.stats\.tool_calls\);\s*\/\/ (.*)\n/.exec(body)[1];
  const d = await startDaemon();
  try {
    fs.mkdirSync(path.join(d.dir, 'build'));
    fs.symlinkSync(d.socketPath, path.join(d.dir, 'build', 'sandboxd.sock'));
    const file = path.join(d.dir, 'readme-example.mjs');
    fs.writeFileSync(file, body.replace("from 'sandboxd'",
      `from ${JSON.stringify(path.join(PKG, 'src', 'index.js'))}`));
    const { stdout } = await run(process.execPath, [file], { cwd: d.dir, env: pipedEnv() });
    assert.equal(stdout, `to ann@example.com: It is 21 degrees\n${want}\n`);
  } finally {
    await d.stop();
  }
}

const BLOCKS = [
  ['sh', 'npm install ./client/node', install],
  ['js', "import { Client } from 'sandboxd';", example],
];

test('every block of the README has a check', () => {
  assert.equal(README.blocks.length, BLOCKS.length);
  for (const { lang, body } of README.blocks) claim(BLOCKS, lang, body);
  assert.throws(() => claim(BLOCKS, 'sh', '$ node frobnicate\n'), /no check in this suite/);
});

for (const [lang, start, check] of BLOCKS) {
  test(`README block: ${check.name}`, async () => {
    const [{ body }] = README.blocks.filter((b) => b.lang === lang && b.body.startsWith(start));
    await check(body);
  });
}

// `command` in the prose: its check.  Make targets are run by hand or by
// make test itself; here they are checked to exist.
const makeTarget = (cmd) => assert.match(MAKEFILE, new RegExp(`^${cmd.split(' ')[1]}:`, 'm'), cmd);
/** What make test-node runs here, with this daemon (`node --test` names it). */
function nodeTest(cmd) {
  if (cmd !== 'node --test') {
    assert.equal(cmd.replace('SANDBOXD_BIN=/path/to/sandboxd ', ''), 'node --test test/*.test.mjs');
  }
  assert.match(MAKEFILE, /^NODE_SUITES := client\/node /m);
  assert.match(MAKEFILE, /^\t@\$\(suite_env\) scripts\/test-node \$\(NODE_SUITES\)$/m);
  assert.match(fs.readFileSync(path.join(REPO, 'scripts', 'test-node'), 'utf8'),
               /\(cd "\$p" && node --test test\/\*\.test\.mjs\)/);
}
const COMMANDS = {
  'make run': makeTarget,
  'make test-node': makeTarget,
  'make test': makeTarget,
  'node --test': nodeTest,
  'SANDBOXD_BIN=/path/to/sandboxd node --test test/*.test.mjs': nodeTest,
};
const COMMAND_RE = /(?:make|node|npm|npx|SANDBOXD_BIN=\S+|scripts\/\S+)(?: [^`]*)?/;

test('every command in the prose has a check, and passes it', () => {
  const cmds = README.commands(COMMAND_RE);
  assert.ok(cmds.length >= 4, cmds);
  for (const c of cmds) {
    assert.ok(COMMANDS[c], `no check in this suite for \`${c}\``);
    COMMANDS[c](c);
  }
});

test('the API the README names exists, with the defaults it gives', async () => {
  const text = README.text;
  const ctor = /`new Client\(\{ ([^}]*) \}\)`/.exec(text)[1].split(', ');
  const c = new sandboxd.Client({ socketPath: '/nonexistent' });
  for (const opt of ctor) {
    const [name, dflt] = opt.split(' = ');
    assert.ok(name in c, `Client has no option ${name}`);
    if (dflt !== undefined) assert.equal(c[name], Number(dflt), name);
  }
  // the table's first column: Client's methods; the session row's result: Session's
  const rows = text.slice(text.indexOf('| method | result |'), text.indexOf('**Tools.**'))
    .split('\n').filter((l) => l.startsWith('| `')).map((l) => l.split(' | '));
  const methods = rows.flatMap((r) => [...r[0].matchAll(/`(\w+)\(/g)].map((m) => m[1]));
  assert.ok(methods.length >= 9, methods);
  for (const m of methods) assert.equal(typeof sandboxd.Client.prototype[m], 'function', `Client.${m}`);
  const sessionRow = rows.find((r) => r[0].startsWith('| `session('));
  for (const m of sessionRow[1].matchAll(/`(\w+)\(/g)) {
    assert.equal(typeof sandboxd.Session.prototype[m[1]], 'function', `Session.${m[1]}`);
  }
  const errors = text.slice(text.indexOf('**Errors.**'), text.indexOf('**Live output.**'));
  const classes = [...errors.matchAll(/`([A-Z]\w+)`/g)].map((m) => m[1]);
  assert.ok(classes.length >= 12, classes);
  for (const name of [...classes, 'ToolAbort']) {
    assert.equal(typeof sandboxd[name], 'function', `sandboxd exports no ${name}`);
  }
});
