// The bridge's pure parts: names to Lua identifiers, results to Lua values,
// results to text within the bound and to structuredContent that validates
// against execute_lua's outputSchema, the catalog within its budget and its
// marks, the confirmation policy, ${NAME} in the config.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { luaName } from '../src/names.js';
import { toLuaValue } from '../src/unwrap.js';
import { renderFailure, renderSuccess, OUTPUT_SCHEMA } from '../src/render.js';
import { buildCatalog, catalogText, firstLine, helperFunctions } from '../src/catalog.js';
import { confirmReason, marks } from '../src/confirm.js';
import { resolveSpec } from '../src/downstream.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';

test('names become Lua identifiers by the contract rule', () => {
  const taken = new Set();
  const got = ['get-sum', '2fast', 'end', 'string', 'parallel', 'a b.c', '', 'get_sum', 'get-sum', 'ünï', 'x'.repeat(200), 'mcp']
    .map((n) => luaName(n, taken));
  assert.equal(got[11], 'mcp_');
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

test('render: text and structuredContent together never exceed the bound; what is cut is said and flagged', () => {
  const notes = [[], ['Note: the Lua state was reset before this call (the session had ended); it starts from an empty state.']];
  let n = 0;
  for (const max of [400, 401, 555, 1000, 24000]) {
    for (const v of [0, 1, 99, 100, 101, 198, 500, 30000]) {
      for (const o of [0, 1, 50, 500, 100000]) {
        for (const truncated of [false, true]) {
          for (const nt of notes) {
            const value = v ? 'é'.repeat(v) : 1;
            const r = renderSuccess({ value, output: 'o'.repeat(o), outputTruncated: truncated && o > 0, bindingNames: ['a', 'b'], notes: nt }, max);
            const text = r.content[0].text;
            const s = r.structuredContent;
            const total = JSON.stringify({ type: 'text', text, structuredContent: s }).length;
            assert.ok(total <= max, `${max}/${v}/${o}: ${total}`);
            // what fits twice (text and structuredContent) with room for the fixed parts is not cut
            const fits = 2 * (JSON.stringify(value, null, 1).length + o) + 200 + (nt[0]?.length ?? 0) <= max;
            if (s.value_truncated) assert.match(text, /\[value cut: [\d,]+ chars of JSON, first [\d,]+ shown/);
            else assert.deepEqual(s.value, value);
            if (s.output_truncated) assert.match(text, /\[output cut|chars of output not shown/);
            else assert.equal(s.output, 'o'.repeat(o));
            assert.equal(s.truncated, s.value_truncated || s.output_truncated);
            if (fits && !truncated) assert.equal(s.truncated, false, `${max}/${v}/${o}`);
            const f = renderFailure({ kind: 'runtime_error', message: 'm'.repeat(v), output: 'o'.repeat(o), stats: { tool_calls: 2 }, notes: nt }, max);
            const ftotal = JSON.stringify({ type: 'text', text: f.content[0].text, structuredContent: f.structuredContent }).length;
            assert.ok(ftotal <= max, `failure ${max}/${v}/${o}: ${ftotal}`);
            assert.match(f.content[0].text, /^error \(runtime_error\): /);
            if (f.structuredContent.output_truncated && o) assert.match(f.content[0].text, /\[output cut|chars of output not shown/);
            n++;
          }
        }
      }
    }
  }
  assert.equal(n, 800);
  // no surrogate pair is split by a cut
  const r = renderSuccess({ value: '😀'.repeat(300) }, 400);
  assert.match(r.content[0].text, /^"(😀)+\n\[value cut/u);
});

test('catalog: the richest level that fits the budget, then fewer servers', () => {
  const tool = (name, description) => ({ name, description, inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } });
  const server = (name, k) => ({ name, tools: Array.from({ length: k }, (_, i) => tool(`tool-${i}`, `Does thing number ${i} with the given path, carefully and at length.`)) });
  const catalog = buildCatalog([server('files', 12), server('mcp', 3), server('web', 5)]);
  assert.deepEqual(catalog.map((c) => c.lua), ['files', 'mcp_', 'web']); // `mcp` is the bridge's own table
  const full = catalogText(catalog, 100000);
  assert.equal(full.level, 0);
  assert.match(full.text, /- files\.tool_0\(\{path: string\}\) \[MCP tool "tool-0"\] -- Does thing number 0 with the given path, carefully and at length\./);
  let last = -1;
  for (const budget of [100000, 2000, 1500, 1200, 900, 400, 150, 60]) {
    const c = catalogText(catalog, budget);
    assert.ok(c.text.length <= budget, `${budget}: ${c.text.length}`);
    assert.ok(c.level >= last);
    last = c.level;
  }
  assert.match(catalogText(catalog, 400).text, /12 tools: `mcp\.tools\("files"\)` lists them/);
  assert.match(catalogText(catalog, 60).text, /more servers: .*`mcp\.tools\(\)` lists every tool/);
  assert.equal(firstLine('A long sentence that goes on and on until it has to be cut somewhere', 30), 'A long sentence that goes...');
  const h = helperFunctions(() => catalog);
  assert.equal(h.tools('web', {}).length, 5);
  assert.equal(h.help('files.tool-3', {}).name, 'files.tool_3');
  assert.throws(() => h.help('nope', {}), /no tool or server named "nope"/);
});

test("outputSchema: every result shape, cut or not, validates with the SDK's validator; a wrong one does not", () => {
  const validate = new AjvJsonSchemaValidator().getValidator(OUTPUT_SCHEMA);
  let n = 0;
  for (const max of [400, 1000, 24000]) {
    for (const v of [0, 99, 500, 30000]) {
      for (const o of [0, 50, 100000]) {
        for (const notes of [[], ['Note: the Lua state was reset before this call.']]) {
          const s = renderSuccess({ value: v ? { k: 'é'.repeat(v) } : null, output: 'o'.repeat(o), outputTruncated: o > 50000, bindingNames: ['a'], notes }, max);
          const f = renderFailure({ kind: 'busy', message: 'm'.repeat(v), output: 'o'.repeat(o), notes, extra: { running_ms: 5 } }, max);
          for (const r of [s, f]) {
            const got = validate(r.structuredContent);
            assert.ok(got.valid, `${max}/${v}/${o}: ${got.errorMessage}`);
            n++;
          }
        }
      }
    }
  }
  assert.equal(n, 144);
  const ok = renderSuccess({ value: 1, output: '' }, 1000).structuredContent;
  for (const bad of [{ ...ok, output: 5 }, { ...ok, value_truncated: undefined }, { output: '', truncated: false, output_truncated: false },
    { ...renderFailure({ kind: 'x', message: 'y' }, 1000).structuredContent, error: { kind: 'x' } }]) {
    assert.equal(validate(JSON.parse(JSON.stringify(bad))).valid, false, JSON.stringify(bad));
  }
});

test('confirmation policy and catalog marks follow the annotations and the MCP defaults', () => {
  const tool = (name, annotations) => ({ name, annotations, inputSchema: { type: 'object', properties: {} } });
  const ro = tool('read', { readOnlyHint: true, openWorldHint: true });
  const add = tool('add', { readOnlyHint: false, destructiveHint: false, idempotentHint: true });
  const del = tool('del', { destructiveHint: true });
  const bare = tool('bare');
  assert.deepEqual([ro, add, del, bare].map((t) => confirmReason('destructive', t)),
    [null, null, 'the tool is marked destructive', 'the tool does not say it is read-only or non-destructive']);
  assert.deepEqual([ro, bare].map((t) => confirmReason('none', t)), [null, null]);
  assert.deepEqual([ro, bare].map((t) => confirmReason('all', t)), Array(2).fill('the bridge asks before every call (--confirm all)'));
  assert.equal(confirmReason('all', ro, true), 'its server\'s "confirm" is "all"');
  assert.deepEqual([ro, bare].map((t) => confirmReason(['bare'], t)), [null, 'its server\'s "confirm" list names it']);
  const catalog = buildCatalog([{ name: 'fs', tools: [ro, add, del, bare] }], (d, t) => confirmReason('destructive', t));
  assert.deepEqual(catalogText(catalog, 100000).text.split('\n').slice(1), [
    '- fs.read({}) [read-only, open-world]',
    '- fs.add({}) [non-destructive, idempotent]',
    '- fs.del({}) [destructive, asks the user]',
    '- fs.bare({}) [asks the user]',
  ]);
  assert.match(catalogText(catalog, 120).text, /4 tools: read, add, del \(asks the user\), bare \(asks the user\)/);
  const h = helperFunctions(() => catalog).help('fs.del', {});
  assert.deepEqual([h.annotations, h.asks_the_user], [{ destructiveHint: true }, 'the tool is marked destructive']);
  assert.deepEqual(marks(bare, null), []);
});

test('${NAME} in url, headers and env comes from the environment; $$ is a dollar', () => {
  const env = { TOKEN: 'abc', HOST: 'h.example' };
  const s = resolveSpec({ url: 'https://${HOST}/mcp', headers: { Authorization: 'Bearer ${TOKEN}', 'X-Price': '$$5 ${TOKEN}$' } }, env);
  assert.equal(s.url.href, 'https://h.example/mcp');
  assert.deepEqual(s.headers, { Authorization: 'Bearer abc', 'X-Price': '$5 abc$' });
  assert.equal(s.kind, 'auto');
  assert.deepEqual(resolveSpec({ command: 'x', env: { A: '${TOKEN}', N: 3 } }, env).env, { A: 'abc', N: '3' });
  assert.deepEqual(resolveSpec({ command: 'x', args: ['${TOKEN}'] }, env).args, ['${TOKEN}']); // args are left as they are
  assert.equal(resolveSpec({ url: 'http://x/sse', type: 'sse' }, env).kind, 'sse');
  assert.throws(() => resolveSpec({ url: 'http://x', headers: { A: '${MISSING}' } }, env), /^Error: headers\.A names the environment variable MISSING, which is not set$/);
  assert.throws(() => resolveSpec({ url: 'http://x', headers: { A: '${not a name}' } }, env), /is not an environment variable name/);
  assert.throws(() => resolveSpec({ url: 'http://x', headers: ['A'] }, env), /"headers" must be an object/);
});
