// The bridge's pure parts: names to Lua identifiers, results to Lua values.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { luaName } from '../src/names.js';
import { toLuaValue } from '../src/unwrap.js';

test('names become Lua identifiers by the contract rule', () => {
  const taken = new Set();
  const got = ['get-sum', '2fast', 'end', 'string', 'parallel', 'a b.c', '', 'get_sum', 'get-sum', 'ünï', 'x'.repeat(200)]
    .map((n) => luaName(n, taken));
  assert.deepEqual(got.slice(0, 10), ['get_sum', '_2fast', 'end_', 'string_', 'parallel_', 'a_b_c', '_', 'get_sum_2', 'get_sum_3', '_n_']);
  assert.equal(got[10], 'x'.repeat(120));
  for (const n of got) assert.match(n, /^[A-Za-z_][A-Za-z0-9_]{0,127}$/);
});

test('results unwrap: structuredContent, JSON text, text, content array, isError', () => {
  assert.deepEqual(toLuaValue({ structuredContent: { a: 1 }, content: [{ type: 'text', text: 'ignored' }] }), { a: 1 });
  assert.deepEqual(toLuaValue({ content: [{ type: 'text', text: ' [1, 2] ' }] }), [1, 2]);
  assert.equal(toLuaValue({ content: [{ type: 'text', text: '42' }] }), 42);
  assert.equal(toLuaValue({ content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }), 'a\nb');
  assert.equal(toLuaValue({ content: [{ type: 'text', text: '{not json' }] }), '{not json');
  const mixed = [{ type: 'text', text: 'x' }, { type: 'image', data: 'AA==', mimeType: 'image/png' }];
  assert.deepEqual(toLuaValue({ content: mixed }), mixed);
  assert.equal(toLuaValue({ content: [] }), null);
  assert.throws(() => toLuaValue({ isError: true, content: [{ type: 'text', text: 'bad input' }] }), /^Error: bad input$/);
  assert.throws(() => toLuaValue({ isError: true, content: [] }), /without text/);
});
