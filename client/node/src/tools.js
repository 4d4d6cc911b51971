// tools.js - the caller's tool objects to the daemon's `tools` list, and back.
//
// A tools object maps a Lua table name to its functions:
//   { Weather: { get: async (city, ctx) => ({ temp: 21 }) } }
// Each function gets the Lua arguments positionally and, after them, a
// context { signal, executionId, tool, function, module, callId }.  A function
// entry may also be { fn, arities: [1, 2] } so the daemon rejects other
// argument counts itself.  `__module` (a string) sets the table's module; a
// tool with no functions is reference-only.  A class instance contributes its
// methods (own and inherited, not those starting with `_`), bound to it.
//
// compileTools() returns { wire, table }: the JSON list for execute's
// `tools`, and a Map tool name -> { module, fns: Map function name -> fn }
// used to route each tool/call.  Bad shapes throw TypeError before anything
// is sent; the daemon applies its own rules to the names.

function methodsOf(obj) {
  const out = [];
  const seen = new Set();
  for (let p = obj; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (seen.has(name) || name === 'constructor' || name.startsWith('_')) continue;
      seen.add(name);
      const d = Object.getOwnPropertyDescriptor(p, name);
      if (d && typeof d.value === 'function') out.push([name, d.value.bind(obj)]);
    }
  }
  return out;
}

function isPlain(o) {
  const p = Object.getPrototypeOf(o);
  return p === Object.prototype || p === null;
}

export function compileTools(tools) {
  const wire = [];
  const table = new Map();
  if (tools == null) return { wire, table };
  if (typeof tools !== 'object' || Array.isArray(tools)) {
    throw new TypeError('tools must be an object mapping table names to their functions');
  }
  for (const [name, spec] of Object.entries(tools)) {
    if (spec === null || typeof spec !== 'object') {
      throw new TypeError(`tools.${name} must be an object of functions`);
    }
    const module = typeof spec.__module === 'string' ? spec.__module : name;
    const entries = isPlain(spec) ? Object.entries(spec) : methodsOf(spec);
    const functions = [];
    const fns = new Map();
    for (const [fname, f] of entries) {
      if (fname === '__module') continue;
      if (typeof f === 'function') {
        functions.push(fname);
        fns.set(fname, f);
      } else if (f && typeof f === 'object' && typeof f.fn === 'function') {
        functions.push(Array.isArray(f.arities) ? { name: fname, arities: f.arities } : fname);
        fns.set(fname, f.fn);
      } else {
        throw new TypeError(`tools.${name}.${fname} must be a function or { fn, arities }`);
      }
    }
    const entry = { name, functions };
    if (module !== name) entry.module = module;
    wire.push(entry);
    table.set(name, { module, fns });
  }
  return { wire, table };
}
