// catalog.js - the downstream tools as Lua names, the catalog in
// execute_lua's description within a budget, and the `mcp` table that lists
// the rest on demand.
//
// buildCatalog(downstreams) maps every running server and its tools to Lua
// identifiers (names.js).  catalogText(catalog, budget) renders the catalog
// at the richest level that fits `budget` characters: each tool with its
// argument summary, its marks (its annotations, and `asks the user` when the
// confirmation policy covers it: confirm.js) and the first line of its description (cut at 120
// characters, then shorter, down to 30), then signatures only, then tool
// names only, then one line per server with its count; servers that still
// do not fit are counted in a last line.  Whatever is left out is reachable from Lua: `mcp.tools()` (or
// `mcp.tools("server")`) lists every tool with its signature and summary,
// `mcp.help("server.tool")` gives one tool's whole description and argument
// schema, `mcp.help("server")` a server's tools with their whole
// descriptions.

import { luaName } from './names.js';
import { marks } from './confirm.js';

export const HELPER = 'mcp';

export function argSummary(schema) {
  const props = schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object'
    ? schema.properties : {};
  const req = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const parts = Object.entries(props).map(([k, p]) => {
    let t = p && typeof p === 'object' ? (Array.isArray(p.enum) ? p.enum.map((x) => JSON.stringify(x)).join('|') : p.type) : null;
    if (Array.isArray(t)) t = t.join('|');
    const key = /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : `["${k}"]`;
    return `${key}${req.has(k) ? '' : '?'}${t ? `: ${t}` : ''}`;
  });
  return `{${parts.join(', ')}}`;
}

/** The first non-blank line of s, cut at a word boundary within max characters. */
export function firstLine(s, max = 240) {
  const line = String(s ?? '').split('\n').map((l) => l.trim()).find((l) => l) ?? '';
  if (line.length <= max) return line;
  const cut = line.slice(0, max - 3);
  const space = cut.lastIndexOf(' ');
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:.-]+$/, '')}...`;
}

/**
 * [{downstream, lua, fns: [{tool, lua, confirm}]}] for the servers that
 * started; confirm is why a call asks the user (confirmReason(d, tool)), or null.
 */
export function buildCatalog(downstreams, confirmReason = () => null) {
  const tables = new Set();
  const catalog = [];
  for (const d of downstreams) {
    if (d.error) continue;
    const lua = luaName(d.name, tables);
    const fnNames = new Set();
    const fns = d.tools.map((t) => ({ tool: t, lua: luaName(t.name, fnNames), confirm: confirmReason(d, t) }));
    catalog.push({ downstream: d, lua, fns });
  }
  return catalog;
}

function header(c) {
  return `### ${c.lua}${c.lua === c.downstream.name ? '' : ` (MCP server "${c.downstream.name}")`}`;
}

function mapped(f) {
  return f.lua === f.tool.name ? '' : ` [MCP tool "${f.tool.name}"]`;
}

function marked(f) {
  const m = marks(f.tool, f.confirm);
  return m.length ? ` [${m.join(', ')}]` : '';
}

/** One tool as a catalog line; desc = how much of its description (0: none). */
export function toolLine(c, f, desc) {
  const d = desc ? firstLine(f.tool.description, desc) : '';
  return `${c.lua}.${f.lua}(${argSummary(f.tool.inputSchema)})${mapped(f)}${marked(f)}${d ? ` -- ${d}` : ''}`;
}

// The levels of detail, richest first: a description cut at each length,
// then signatures only, then tool names only, then one line per server.
const DESC = [120, 100, 80, 60, 45, 30];
export const LEVELS = DESC.length + 3;

function serverBlock(c, level) {
  const out = [header(c)];
  if (c.downstream.exited) out.push(`(not running: ${c.downstream.exited})`);
  if (!c.fns.length) {
    out.push('(no tools)');
  } else if (level <= DESC.length) {
    const desc = level < DESC.length ? DESC[level] : 0;
    for (const f of c.fns) out.push(`- ${toolLine(c, f, desc)}`);
  } else if (level === DESC.length + 1) {
    out.push(`${c.fns.length} tools: ${c.fns.map((f) => `${f.lua}${mapped(f)}${f.confirm ? ' (asks the user)' : ''}`).join(', ')}`);
  } else {
    out.push(`${c.fns.length} tools: \`mcp.tools("${c.lua}")\` lists them`);
  }
  return out.join('\n');
}

/**
 * The catalog at the richest level that fits `budget` characters: { text,
 * level } (0: every description at its first 120 characters; LEVELS: not
 * even one line per server fits, so only the servers that do are shown).
 */
export function catalogText(catalog, budget) {
  for (let level = 0; level < LEVELS; level++) {
    const text = catalog.map((c) => serverBlock(c, level)).join('\n\n');
    if (text.length <= budget) return { text, level };
  }
  let out = '';
  let n = 0;
  for (const c of catalog) {
    const b = `${out ? '\n\n' : ''}${serverBlock(c, LEVELS - 1)}`;
    if (out.length + b.length + 80 > budget) break;
    out += b;
    n++;
  }
  const rest = catalog.slice(n).map((c) => c.lua).join(', ');
  const room = Math.max(0, budget - out.length - 70);
  out += `\n\n(${catalog.length - n} more servers: ${rest.length > room ? `${rest.slice(0, room)}...` : rest}; ` +
    '`mcp.tools()` lists every tool)';
  return { text: out, level: LEVELS };
}

/** The functions of the `mcp` table in the sandbox: tools(server?) and help(name). */
export function helperFunctions(getCatalog) {
  const find = (name) => {
    const catalog = getCatalog();
    const c = catalog.find((x) => x.lua === name || x.downstream.name === name);
    if (c) return { c };
    const dot = String(name).indexOf('.');
    if (dot > 0) {
      const s = catalog.find((x) => x.lua === name.slice(0, dot) || x.downstream.name === name.slice(0, dot));
      const f = s?.fns.find((x) => x.lua === name.slice(dot + 1) || x.tool.name === name.slice(dot + 1));
      if (f) return { c: s, f };
    }
    return null;
  };
  return {
    tools: (...a) => {
      a.pop();
      const [server] = a;
      const catalog = getCatalog();
      let list = catalog;
      if (server !== undefined && server !== null) {
        if (typeof server !== 'string') throw new Error('takes a server name (a string) or nothing');
        const hit = find(server);
        if (!hit || hit.f) throw new Error(`no server named "${server}"; mcp.tools() lists every tool`);
        list = [hit.c];
      }
      return list.flatMap((c) => c.fns.map((f) => toolLine(c, f, 240)));
    },
    help: (...a) => {
      a.pop();
      const [name] = a;
      if (typeof name !== 'string') throw new Error('takes a name: "server" or "server.tool"');
      const hit = find(name);
      if (!hit) throw new Error(`no tool or server named "${name}"; mcp.tools() lists every tool`);
      const { c, f } = hit;
      if (!f) {
        return {
          server: c.lua,
          mcp_server: c.downstream.name,
          running: !c.downstream.exited,
          tools: c.fns.map((x) => ({ name: `${c.lua}.${x.lua}`, description: String(x.tool.description ?? '') })),
        };
      }
      const out = {
        name: `${c.lua}.${f.lua}`,
        mcp_name: f.tool.name,
        server: c.lua,
        call: `${c.lua}.${f.lua}(${argSummary(f.tool.inputSchema)})`,
        description: String(f.tool.description ?? ''),
        arguments: f.tool.inputSchema ?? {},
      };
      if (f.tool.outputSchema) out.returns = f.tool.outputSchema;
      if (f.tool.annotations) out.annotations = f.tool.annotations;
      if (f.confirm) out.asks_the_user = f.confirm;
      return out;
    },
  };
}
