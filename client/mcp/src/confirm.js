// confirm.js - which downstream calls ask the host's user first, what the
// user is asked, and the Lua error a call that was not confirmed raises.
//
// The policy is --confirm (or a server's "confirm"): "none"; "all"; a list of
// tool names (MCP names); or "destructive", which asks unless the tool's
// annotations say readOnlyHint: true or destructiveHint: false.  A tool
// without annotations is asked about, as the MCP specification's defaults
// (readOnlyHint false, destructiveHint true) make it possibly destructive.
// Annotations are the downstream server's own hints: the policy trusts them as
// far as the operator trusts that server (give it "confirm": "all" if not).
//
// marks(tool, reason) is the compact list the catalog shows after a tool.

const MAX_ARGS_CHARS = 4000;

/** Why a call of `tool` needs confirmation under `policy`, or null. */
export function confirmReason(policy, tool, perServer = false) {
  const a = tool?.annotations ?? {};
  if (Array.isArray(policy)) return policy.includes(tool.name) ? 'its server\'s "confirm" list names it' : null;
  if (policy === 'all') return perServer ? 'its server\'s "confirm" is "all"' : 'the bridge asks before every call (--confirm all)';
  if (policy !== 'destructive' || a.readOnlyHint === true || a.destructiveHint === false) return null;
  return a.destructiveHint === true ? 'the tool is marked destructive'
    : 'the tool does not say it is read-only or non-destructive';
}

/** The catalog's marks for a tool: its annotations, and whether it asks. */
export function marks(tool, reason) {
  const a = tool?.annotations ?? {};
  const m = [];
  if (a.readOnlyHint === true) m.push('read-only');
  else if (a.destructiveHint === true) m.push('destructive');
  else if (a.destructiveHint === false && a.readOnlyHint === false) m.push('non-destructive');
  if (a.idempotentHint === true && a.readOnlyHint !== true) m.push('idempotent');
  if (a.openWorldHint === true) m.push('open-world');
  if (reason) m.push('asks the user');
  return m;
}

/** An object's keys in order (a Lua table's order is its hash's): the same call reads the same. */
function sorted(_, v) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]));
}

/** The arguments as JSON, keys sorted, cut at MAX_ARGS_CHARS with a line that says so. */
function argsText(args) {
  const text = JSON.stringify(args, sorted, 1) ?? 'null';
  if (text.length <= MAX_ARGS_CHARS) return text;
  return `${text.slice(0, MAX_ARGS_CHARS)}\n[arguments cut: ${text.length.toLocaleString('en-US')} chars, ` +
    `the first ${MAX_ARGS_CHARS.toLocaleString('en-US')} shown]`;
}

/** The message of elicitation/create: the tool, its server, why, the arguments. */
export function askText(label, server, toolName, args, why) {
  return `Allow this tool call? Code run by execute_lua (sandboxd-mcp) wants to call the tool "${toolName}" ` +
    `of the MCP server "${server}" (${label} in Lua); the bridge asks because ${why}.\n` +
    `Arguments:\n${argsText(args)}\n` +
    'Accept runs the call; decline refuses it, and the code gets an error.';
}

/**
 * The message of the Lua error for a call that did not run (the sandboxd
 * client puts `server.tool: ` in front): how is declined, cancelled, refused
 * (the host cannot ask and the bridge refuses such calls) or failed (asking
 * failed: `detail`).
 */
export function refusal(how, why, detail) {
  switch (how) {
    case 'declined':
      return `not run: the user declined this call (asked because ${why})`;
    case 'cancelled':
      return `not run: the user dismissed the confirmation without accepting (asked because ${why})`;
    case 'refused':
      return `not run: this call needs the user's confirmation (${why}), and this MCP host cannot ask ` +
        'for it (it has no elicitation)';
    default:
      return `not run: asking the user to confirm this call failed (${detail})`;
  }
}
