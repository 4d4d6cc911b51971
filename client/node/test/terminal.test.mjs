// The suite passes with its output on a terminal as it does piped (as make
// test and CI run it): the other test files run again here, under node --test
// whose output is a pseudo-terminal (script(1), util-linux).  There node --test
// starts each file with FORCE_COLOR=1, which a child process started by a test
// inherits: console.log then colours what the test reads from its pipe.
// The run gets the terminal a newcomer has: Node colours nothing where CI is
// set (as in CI itself) or TERM is unset or dumb, and so would hide the bug.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCALE } from './daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SCRIPT = '/usr/bin/script';
const SELF = path.basename(fileURLToPath(import.meta.url));
const quote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

test('the suite passes when its output is a terminal',
  { skip: !fs.existsSync(SCRIPT) && 'no script(1) here' }, async () => {
    const files = fs.readdirSync(HERE).filter((f) => f.endsWith('.test.mjs') && f !== SELF)
      .sort().map((f) => path.join(HERE, f));
    const env = { ...process.env, SHELL: '/bin/sh' };
    delete env.NODE_TEST_CONTEXT;       // the run below is a runner of its own
    delete env.FORCE_COLOR;
    delete env.NO_COLOR;
    delete env.NODE_DISABLE_COLORS;
    delete env.CI;
    env.TERM = 'xterm-256color';
    const cmd = [process.execPath, '--test', ...files].map(quote).join(' ');
    const { code, out } = await new Promise((resolve) => {
      execFile(SCRIPT, ['-qec', cmd, '/dev/null'],
        { env, timeout: 300000 * SCALE, maxBuffer: 64 << 20 },
        (err, stdout) => resolve({ code: err ? err.code ?? err.signal : 0, out: stdout }));
    });
    const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
    assert.notEqual(out, plain, 'no colour: the run did not see a terminal');
    assert.equal(code, 0, plain.slice(-4000));
    assert.match(plain, /^ℹ fail 0\r?$/m);
    assert.match(plain, /^ℹ pass [1-9]/m);
  });
