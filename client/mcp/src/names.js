// names.js - MCP server and tool names to Lua identifiers.
//
// luaName(name, taken) maps one name by the bridge's rule and records it in
// `taken` (a Set of the names already used in the same scope): every
// character outside [A-Za-z0-9_] becomes `_`, a leading digit gets a `_` in
// front, a Lua keyword or a name the sandbox defines (the bridge's own `mcp`
// table included) gets a `_` after, and
// a name already taken gets `_2`, `_3`, ... .  Names are cut to 120
// characters first, so the result stays within the daemon's 128.

const KEYWORDS = ['and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function', 'goto',
  'if', 'in', 'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true', 'until', 'while'];
const SANDBOX = ['_G', '_ENV', '_VERSION', 'assert', 'collectgarbage', 'error', 'getmetatable',
  'ipairs', 'load', 'next', 'pairs', 'pcall', 'print', 'rawequal', 'rawget', 'rawlen', 'rawset',
  'select', 'setmetatable', 'tonumber', 'tostring', 'type', 'xpcall', 'unpack', 'string', 'table',
  'math', 'utf8', 'coroutine', 'os', 'parallel', '__module', 'mcp'];
const RESERVED = new Set([...KEYWORDS, ...SANDBOX]);

export function luaName(name, taken) {
  let n = String(name).slice(0, 120).replace(/[^A-Za-z0-9_]/g, '_');
  if (n === '') n = '_';
  if (/^[0-9]/.test(n)) n = `_${n}`;
  if (RESERVED.has(n)) n = `${n}_`;
  const base = n;
  for (let i = 2; taken.has(n); i++) n = `${base}_${i}`;
  taken.add(n);
  return n;
}
