// src/index.d.ts against the code: every export, method and property it
// declares exists, and every public export, method and property of the code
// is declared (typescript's own parser reads the file); and test/usage.ts,
// which tsc checks against the declarations (make test-node), run for real.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import * as api from '../src/index.js';
import { startDaemon } from './daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SRC = path.join(HERE, '..', 'src');

// { name: { kind: 'class' | 'function' | 'type', members: Map name -> 'method' | 'property' } }
function declarations() {
  const file = path.join(SRC, 'index.d.ts');
  const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const out = {};
  for (const st of sf.statements) {
    const exported = st.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (!exported) continue;
    if (ts.isClassDeclaration(st)) {
      const members = new Map();
      for (const m of st.members) {
        if (ts.isConstructorDeclaration(m)) continue;
        const name = ts.isComputedPropertyName(m.name) ? m.name.expression.getText(sf) : m.name.getText(sf);
        members.set(name, ts.isMethodDeclaration(m) ? 'method'
          : ts.isGetAccessor(m) ? 'getter' : 'property');
      }
      out[st.name.text] = { kind: 'class', members };
    } else if (ts.isFunctionDeclaration(st)) {
      out[st.name.text] = { kind: 'function' };
    } else {
      out[st.name.text] = { kind: 'type' };
    }
  }
  return out;
}

// An instance of each class, to look for its properties.
function instances(socketPath) {
  const client = new api.Client({ socketPath });
  return {
    Client: client,
    Session: new api.Session(client, null, 's1', new Map(), 1000),
    ToolAbort: new api.ToolAbort('x'),
  };
}

test('every export the code has is declared, and every declared value export exists', () => {
  const decl = declarations();
  for (const name of Object.keys(api)) {
    assert.ok(decl[name] && decl[name].kind !== 'type', `${name} is exported but not declared`);
  }
  for (const [name, d] of Object.entries(decl)) {
    if (d.kind === 'type') continue;
    assert.equal(typeof api[name], 'function', `${name} is declared but not exported`);
  }
});

test('each class: declared members exist, public members are declared', () => {
  const decl = declarations();
  const inst = instances('/nonexistent/sandboxd.sock');
  for (const [name, d] of Object.entries(decl)) {
    if (d.kind !== 'class') continue;
    const Cls = api[name];
    const obj = inst[name] ?? new Cls('m', { kind: 'busy', data: { output: 'o', stats: null } });
    for (const [m, what] of d.members) {
      if (m === 'Symbol.asyncDispose') {
        if (typeof Symbol.asyncDispose !== 'symbol') continue;
        assert.equal(typeof obj[Symbol.asyncDispose], 'function', `${name}[${m}]`);
      } else if (what === 'method') {
        assert.equal(typeof Cls.prototype[m], 'function', `${name}.${m}() is declared, not defined`);
      } else {
        assert.ok(m in obj, `${name}.${m} is declared, not defined`);
      }
    }
    const own = [...Object.keys(obj), ...Object.getOwnPropertyNames(Cls.prototype)];
    for (const m of own) {
      if (m === 'constructor' || m.startsWith('_') || m === 'name' || m === 'stack'
          || m === 'message' || m === 'cause') continue;
      assert.ok(d.members.has(m) || declaredOnBase(decl, name, m), `${name}.${m} is not declared`);
    }
  }
  inst.Client.close();
});

function declaredOnBase(decl, name, m) {
  return name !== 'SandboxdError' && api[name].prototype instanceof api.SandboxdError
    && decl.SandboxdError.members.has(m);
}

let d;
before(async () => { d = await startDaemon(); });
after(async () => { await d.stop(); });

test('test/usage.ts, transpiled, runs as it says against the daemon', async () => {
  const src = fs.readFileSync(path.join(HERE, 'usage.ts'), 'utf8');
  const js = ts.transpileModule(src, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
  }).outputText.replace("'../src/index.js'", JSON.stringify(pathToFileURL(path.join(SRC, 'index.js')).href));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxnode-usage-'));
  try {
    const file = path.join(dir, 'usage.mjs');
    fs.writeFileSync(file, js);
    const { main } = await import(pathToFileURL(file).href);
    const log = await main(d.socketPath);
    assert.deepEqual(log, [
      'live Paris',
      'value 22 output Paris names n calls 1',
      'ctx Weather.get MyApp.Weather true',
      'again 42',
      'names n',
      'check true',
      'language Lua 5.3',
      'ping {}',
      'workers number',
      'sessions true',
      'lua runtime_error line 1 retry false',
      'aborted enough',
      'cancelled cancelled',
      'classes true',
      'json {"a":[1,2.5]}',
      'session 2 k',
    ]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
