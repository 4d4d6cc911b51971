// json.js - JavaScript values to the JSON text the daemon accepts.
//
// encode(value) returns compact JSON that is valid UTF-8 and that jansson
// parses, or throws a TypeError naming what cannot be sent:
//   - NaN and the infinities are refused (JSON.stringify would send null);
//   - a BigInt inside the signed 64-bit range is written as an exact integer,
//     one outside it is refused;
//   - a lone UTF-16 surrogate (a string JavaScript holds but UTF-8 cannot) is
//     sent as U+FFFD, as the daemon does for Lua strings that are not UTF-8;
//   - a cycle is refused (JSON.stringify's own TypeError);
//   - everything else follows JSON.stringify: undefined and functions are
//     left out of objects and are null in arrays, toJSON() is honoured
//     (Date becomes its ISO string), Map and Set become {}.
// The result of encode(undefined) is "null".

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
// Marks a BigInt inside the JSON text until it is written out as digits.  The
// random tag keeps a user string from ever looking like the mark.
const TAG = `\u0000sbx-bigint-${Math.random().toString(36).slice(2)}:`;
const TAG_JSON = JSON.stringify(TAG).slice(1, -1);
const TAG_RX = new RegExp(`"${TAG_JSON.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')}(-?\\d+)"`, 'g');
// JSON.stringify escapes exactly the lone surrogates as \udXXX; an escape
// preceded by an odd number of backslashes is text, not an escape.
const LONE_RX = /(?<=(?:^|[^\\])(?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/g;

function check(key, v) {
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError(`${v} cannot be sent as JSON (it has no such number)`);
  } else if (typeof v === 'bigint') {
    if (v < INT64_MIN || v > INT64_MAX) {
      throw new TypeError(`the BigInt ${v} is outside the signed 64-bit range JSON integers keep here`);
    }
    sawBigint = true;
    return TAG + v.toString();
  }
  return v;
}
let sawBigint = false;

/** Compact JSON for value; throws TypeError for what cannot be sent (see above). */
export function encode(value) {
  switch (typeof value) { // the common answers, without the replacer
    case 'string': return encodePlain(value);
    case 'boolean': return value ? 'true' : 'false';
    case 'number': if (Number.isFinite(value)) return String(value); break;
    case 'undefined': return 'null';
    default: if (value === null) return 'null';
  }
  sawBigint = false;
  let text;
  try {
    text = JSON.stringify(value === undefined ? null : value, check);
  } catch (e) {
    if (e instanceof TypeError && /circular/i.test(e.message)) {
      throw new TypeError('a value that contains itself (a cycle) cannot be sent as JSON');
    }
    throw e;
  }
  if (text === undefined) text = 'null'; // a bare function or symbol
  if (sawBigint) text = text.replace(TAG_RX, '$1');
  if (text.includes('\\ud')) text = text.replace(LONE_RX, '\\ufffd');
  return text;
}

/**
 * Fast path for messages built by the client itself whose only free-form
 * parts are strings: the same guarantees, without the replacer.
 */
export function encodePlain(value) {
  let text = JSON.stringify(value);
  if (text.includes('\\ud')) text = text.replace(LONE_RX, '\\ufffd');
  return text;
}
