// render.js - an execute_lua result as the text a model reads and the
// structuredContent beside it, together within --max-result-chars.
//
// Hosts differ in what they give the model: the AI SDK and the OpenAI Agents
// SDK the text only, LangChain's MCP adapters the text block with the
// structuredContent in it, as JSON.  So the bound covers that widest view:
// JSON.stringify({type: "text", text, structuredContent}) is at most the
// bound (so the text alone is shorter), and the text alone says everything
// the model needs (the kind of an error included, since some hosts drop
// isError).
//
// In the text, notes and fixed lines are placed first; the value (as JSON)
// and the printed output share the rest, each getting at least half when it
// needs it and the other's unused part (on failure the message comes first,
// then the notes, then the output).  What is cut keeps its head and is
// followed by a line saying how much there was, how much is shown, and what
// to do instead; when too little room is left for some of both, the output
// is replaced by a line giving its size.  structuredContent carries the same
// cut output, the value only when it was not cut (else null), the flags
// `truncated`, `value_truncated` and `output_truncated` (the daemon's own cut
// at max_output_bytes included), and the bridge's `notes` when there are any
// (for hosts that show the model structuredContent alone).  The text budget is lowered until text and
// structuredContent fit together.
//
// MIN_RESULT_CHARS is the smallest bound accepted.  OUTPUT_SCHEMA is
// execute_lua's outputSchema: the JSON Schema of both shapes of
// structuredContent (a cut value is null, which `value`'s empty schema allows).

export const MIN_RESULT_CHARS = 400;

const strings = { type: 'array', items: { type: 'string' } };
export const OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    value: { description: 'What the chunk returned, as JSON; null when it was cut (value_truncated)' },
    output: { type: 'string', description: 'What the chunk printed (its head when cut)' },
    binding_names: { ...strings, description: 'The data globals saved after the call' },
    truncated: { type: 'boolean' },
    value_truncated: { type: 'boolean' },
    output_truncated: { type: 'boolean' },
    notes: { ...strings, description: 'What became of the Lua state, and calls run without confirmation' },
    error: {
      type: 'object',
      description: 'Present when the call failed (isError): the kind of error and its message',
      properties: { kind: { type: 'string' }, message: { type: 'string' }, running_ms: { type: 'number' } },
      required: ['kind', 'message'],
    },
  },
  required: ['output', 'truncated', 'output_truncated'],
  anyOf: [
    { required: ['value', 'binding_names', 'value_truncated'] },
    { required: ['error'] },
  ],
};

const fmt = (n) => n.toLocaleString('en-US');

/** Cut s to at most n UTF-16 units without splitting a surrogate pair. */
function head(s, n) {
  if (s.length <= n) return s;
  let k = Math.max(0, n);
  const c = s.charCodeAt(k - 1);
  if (k > 0 && c >= 0xd800 && c <= 0xdbff) k--;
  return s.slice(0, k);
}

/** The names, comma separated, within max characters ("and N more"). */
function nameList(names, max) {
  let out = '';
  for (let i = 0; i < names.length; i++) {
    const more = names.length - i;
    const next = (out ? `${out}, ` : '') + names[i];
    const tail = more > 1 ? ` (and ${more - 1} more)` : '';
    if (next.length + tail.length > max) {
      return out ? `${out} (and ${more} more)` : `${names.length} globals`;
    }
    out = next;
  }
  return out;
}

/**
 * Share `avail` characters between two texts of lengths a and b: the first
 * gets at least the fraction `wa` when it needs it, the second the rest, and
 * each the other's unused part.
 */
function share(avail, a, b, wa = 0.5) {
  avail = Math.max(0, avail);
  if (a + b <= avail) return [a, b];
  const least = Math.floor(avail * wa);
  const sa = Math.min(a, Math.max(least, avail - b));
  return [sa, Math.min(b, avail - sa)];
}

function outputNote(total, shown, byDaemon) {
  if (shown >= total) return `[output cut by the daemon at its max_output_bytes (${fmt(total)} chars kept); print less]`;
  return `[output cut: ${fmt(total)} chars${byDaemon ? ' (the daemon\'s max_output_bytes reached)' : ''}, ` +
    `first ${fmt(shown)} shown; print less]`;
}

function valueNote(total, shown) {
  return `[value cut: ${fmt(total)} chars of JSON, first ${fmt(shown)} shown; return less]`;
}

const hiddenOutput = (o) => `[${fmt(o)} chars of output not shown]`;

/** A successful result with at most `max` characters of text (renderSuccess below). */
function successAt({ value, valueText, output = '', outputTruncated = false, bindingNames = null, notes = [], noteCopy = true }, max) {
  const v = valueText.length;
  const o = output.length;
  // the value keeps at least its first 100 characters: the list of globals, then the notes give way
  let pre = notes.length ? `${notes.join('\n')}\n\n` : '';
  let globals = bindingNames && bindingNames.length
    ? `\n\nglobals kept: ${nameList(bindingNames, Math.max(40, Math.floor(max / 10)))}` : '';
  const valueMin = Math.min(v, 100) + (v > 100 ? valueNote(v, 100).length + 1 : 0) +
    (o ? hiddenOutput(o).length + 2 : 0);
  if (max - pre.length - globals.length < valueMin) globals = '';
  if (max - pre.length < valueMin) pre = pre ? `${head(pre, Math.max(0, max - valueMin - 5))}...\n\n` : '';
  const room = max - pre.length - globals.length;
  const printedHead = '\n\nprinted:\n';
  let avail = room - (o ? printedHead.length : 0);
  const daemonOnly = outputTruncated ? outputNote(o, o, true).length + 1 : 0;
  let [vs, os] = share(avail - daemonOnly, v, o);
  let cutValue = vs < v;
  let cutOutput = os < o;
  if (cutValue || cutOutput) {
    avail -= (cutValue ? valueNote(v, v).length + 1 : 0) +
      (cutOutput ? outputNote(o, o - 1, outputTruncated).length + 1 : daemonOnly);
    [vs, os] = share(avail, v, o);
    if (cutValue) vs = Math.min(vs, v - 1);
    if (cutOutput) os = Math.min(os, o - 1);
  }
  let outputText = '';
  if (o && (cutValue || cutOutput) && (os < 20 || vs < Math.min(v, 100))) {
    // too little room for some of both: the value, and how much output is not shown
    outputText = `\n\n${hiddenOutput(o)}`;
    cutOutput = true;
    os = 0;
    vs = Math.min(v, room - outputText.length);
    if (vs < v) vs = Math.max(0, room - outputText.length - valueNote(v, v).length - 1);
    cutValue = vs < v;
  }
  const shownValue = head(valueText, vs);
  const shownOutput = head(output, os);
  if (o && !outputText) {
    outputText = printedHead + shownOutput;
    if (cutOutput || outputTruncated) outputText += `\n${outputNote(o, shownOutput.length, outputTruncated)}`;
  }
  let text = pre + shownValue;
  if (cutValue) text += `\n${valueNote(v, shownValue.length)}`;
  text = head(text + outputText + globals, max);
  const structured = {
    value: cutValue ? null : (value ?? null),
    output: shownOutput,
    binding_names: bindingNames ?? [],
    truncated: cutValue || cutOutput || outputTruncated,
    value_truncated: cutValue,
    output_truncated: cutOutput || outputTruncated,
  };
  if (notes.length && noteCopy) structured.notes = notes;
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

/** A failed result with at most `max` characters of text (renderFailure below). */
function failureAt({ kind, message, output = '', outputTruncated = false, stats, notes = [], extra, noteCopy = true }, max) {
  const first = `error (${kind}): `;
  const msg = String(message ?? '');
  const MSG_CUT = ' [message cut]';
  const printedHead = '\n\nprinted before the error:\n';
  // the message first (at least its first 60 characters), then the notes,
  // the count of tool calls, and the output with the room left
  const calls = stats && typeof stats.tool_calls === 'number' ? `\n\ntool calls made: ${stats.tool_calls}` : '';
  const post = notes.length ? `\n\n${notes.join('\n')}` : '';
  const msgMin = Math.min(msg.length, 60) + (msg.length > 60 ? MSG_CUT.length : 0);
  let tail = calls + post;
  if (max - first.length - tail.length < msgMin) tail = post;
  if (max - first.length - tail.length < msgMin) tail = head(tail, Math.max(0, max - first.length - msgMin));
  const room = max - first.length - tail.length;
  const o = output.length;
  let avail = room - (o ? printedHead.length : 0);
  const daemonOnly = outputTruncated ? outputNote(o, o, true).length + 1 : 0;
  let [ms, os] = share(avail - daemonOnly, msg.length, o, 0.7);
  let cutMsg = ms < msg.length;
  let cutOutput = os < o;
  if (cutMsg || cutOutput) {
    avail -= (cutMsg ? MSG_CUT.length : 0) + (cutOutput ? outputNote(o, o - 1, outputTruncated).length + 1 : daemonOnly);
    [ms, os] = share(avail, msg.length, o, 0.7);
    if (cutOutput) os = Math.min(os, o - 1);
  }
  let outputText = '';
  if (o && (cutMsg || cutOutput) && (os < 20 || ms < Math.min(msg.length, 60))) {
    // too little room for some of both: the message, and how much output is not shown
    outputText = `\n\n${hiddenOutput(o)}`;
    cutOutput = true;
    os = 0;
    ms = Math.min(msg.length, room - outputText.length);
    if (ms < msg.length) ms = Math.max(0, room - outputText.length - MSG_CUT.length);
    cutMsg = ms < msg.length;
  } else if (o) {
    const shown = head(output, os);
    outputText = printedHead + shown;
    if (cutOutput || outputTruncated) outputText += `\n${outputNote(o, shown.length, outputTruncated)}`;
  }
  const shownMsg = head(msg, ms) + (cutMsg ? MSG_CUT : '');
  const shownOutput = head(output, os);
  const text = head(first + shownMsg + outputText + tail, max);
  return {
    isError: true,
    content: [{ type: 'text', text }],
    structuredContent: {
      error: { kind, message: shownMsg, ...extra },
      output: shownOutput,
      truncated: cutMsg || cutOutput || outputTruncated,
      output_truncated: cutOutput || outputTruncated,
      ...(notes.length && noteCopy ? { notes } : {}),
    },
  };
}

/**
 * The largest text budget (by bisection) at which the text and
 * structuredContent fit `max` together; without the copy of the notes in
 * structuredContent if they do not fit even then.
 */
function fit(render, r, max) {
  // what the widest host shows: the text block with structuredContent, as JSON
  const size = (out) => JSON.stringify({ type: 'text', text: out.content[0].text, structuredContent: out.structuredContent }).length;
  let out;
  for (const noteCopy of [true, false]) {
    const at = (budget) => render({ ...r, noteCopy }, budget);
    out = at(max);
    if (size(out) <= max) return out;
    if (noteCopy && !(r.notes ?? []).length) continue;
    let lo = 0;
    let hi = max;
    let best = null;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      const o = at(mid);
      if (size(o) <= max) {
        lo = mid;
        best = o;
      } else {
        hi = mid;
      }
    }
    // the copy of the notes only when the text keeps them whole
    const whole = (o) => (r.notes ?? []).every((n) => o.content[0].text.includes(n));
    if (best && (!noteCopy || whole(best))) return best;
  }
  return out;
}

/**
 * A successful result.
 * @param {object} r
 * @param {any} r.value
 * @param {string} r.output
 * @param {boolean} r.outputTruncated  the daemon cut the output at max_output_bytes
 * @param {string[]|null} r.bindingNames data globals saved, or null when not known
 * @param {string[]} r.notes  the bridge's notes on the state, shown first
 * @param {number} max  the bound on the text and structuredContent together
 */
export function renderSuccess(r, max) {
  return fit(successAt, { ...r, valueText: JSON.stringify(r.value ?? null, null, 1) ?? 'null' }, max);
}

/**
 * A failed result: isError, `error (kind): message`, then the output so far,
 * the number of tool calls made and the notes on the state.
 * @param {object} f
 * @param {string} f.kind
 * @param {string} f.message
 * @param {string} [f.output]
 * @param {boolean} [f.outputTruncated]
 * @param {object} [f.stats]
 * @param {string[]} [f.notes]  shown after the error
 * @param {object} [f.extra]  more fields for structuredContent.error
 * @param {number} max  the bound on the text and structuredContent together
 */
export function renderFailure(f, max) {
  return fit(failureAt, f, max);
}
