#!/usr/bin/env node
// examples/node-agent.mjs - an agent loop on the sandboxd Node client.
//
//   make run                                   # in one terminal: the daemon on build/sandboxd.sock
//   SANDBOXD_SOCKET=build/sandboxd.sock node examples/node-agent.mjs
//
// The "model" here is scripted (two canned answers), so the example runs
// offline; swap `model()` for a call to your LLM.  What it shows is the loop
// around it: the system prompt from prompt_info plus a tool catalog, the
// model's Lua run with two host tools (Orders, Mail), errors fed back to the
// model with what printed and how many tool calls ran, and globals kept
// between turns as bindings.

import { Client, SandboxdError } from '../client/node/src/index.js';

const ORDERS = {
  ann: [{ id: 1, total: 120.5, status: 'shipped' }, { id: 2, total: 35, status: 'open' }],
  bob: [{ id: 3, total: 80, status: 'open' }],
};
const outbox = [];

const tools = {
  Orders: {
    // Orders.list(customer) -> array of {id, total, status}
    list: async (customer, ctx) => {
      await new Promise((r) => setTimeout(r, 10)); // a slow backend
      if (ctx.signal.aborted) throw new Error('cancelled');
      if (!(customer in ORDERS)) throw new Error(`no customer ${customer}`);
      return ORDERS[customer];
    },
  },
  Mail: {
    // Mail.draft(to, subject, body) -> draft id
    draft: { fn: (to, subject, body) => outbox.push({ to, subject, body }), arities: [3] },
  },
};

const catalog = `- Orders.list(customer) -> array of {id, total, status}; raises for an unknown customer
- Mail.draft(to, subject, body) -> draft id`;

// Three canned answers: the first ends with a bare expression (a syntax
// error the daemon explains), the second is the fix and leaves the global
// `open` behind, the third uses it.
const first = `open = {}
for _, who in ipairs({"ann", "bob", "carl"}) do
  local ok, orders = pcall(Orders.list, who)
  if ok then
    for _, o in ipairs(orders) do
      if o.status == "open" then open[#open + 1] = {who = who, id = o.id, total = o.total} end
    end
  else
    print("skipped: " .. orders)
  end
end
#open`;
const answers = [first, first.replace(/#open$/, 'return #open'),
  `local sum = 0
for _, o in ipairs(open) do
  sum = sum + o.total
  Mail.draft(o.who .. "@example.com", "Order " .. o.id, "Your order of " .. o.total .. " is still open.")
end
return {open_orders = #open, total = sum}`,
];
function model(systemPrompt, transcript) {
  return answers[transcript.filter((m) => m.role === 'assistant').length] ?? null;
}

const client = new Client();
const info = await client.promptInfo();
const system = `You write ${info.language} code.\n${info.constraints}\n\nTools:\n${catalog}`;
const transcript = [{ role: 'user', content: 'Draft a reminder for every open order and tell me the total.' }];
let bindings = [];
for (let turn = 1; ; turn++) {
  const code = model(system, transcript);
  if (code === null) break; // the model is done
  transcript.push({ role: 'assistant', content: code });
  try {
    const r = await client.execute(code, { tools, bindings, timeoutMs: 5000, limits: { max_heap: 50e6 } });
    bindings = r.bindings; // after an error the previous bindings stand
    console.log(`turn ${turn}: value ${JSON.stringify(r.value)}; ${r.stats.tool_calls} tool calls; ` +
      `globals ${r.bindingNames.join(', ') || '(none)'}${r.output ? `; printed: ${r.output.trim()}` : ''}`);
    transcript.push({ role: 'tool', content: JSON.stringify(r.value) });
  } catch (e) {
    if (!(e instanceof SandboxdError)) throw e;
    const feedback = `error (${e.kind}): ${e.message}` +
      (e.output ? `\nprinted before the error:\n${e.output}` : '') +
      (e.stats ? `\ntool calls made: ${e.stats.tool_calls}` : '');
    console.log(`turn ${turn}: ${feedback.split('\n')[0]}`);
    transcript.push({ role: 'tool', content: feedback });
  }
}
console.log(`drafts: ${outbox.map((m) => `${m.to}: ${m.subject}`).join('; ')}`);
client.close();
