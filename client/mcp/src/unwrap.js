// unwrap.js - an MCP tool result to the one value Lua receives.
//
// toLuaValue(result) returns `structuredContent` when present; else, when
// every content item is text, that text (items joined by newlines), decoded
// as JSON when the whole text is one JSON value; else the content array as it
// is.  An `isError` result throws an Error carrying its text, which the
// sandboxd client turns into a Lua error pcall can catch.

export function resultText(result) {
  const content = Array.isArray(result?.content) ? result.content : [];
  return content.filter((c) => c?.type === 'text' && typeof c.text === 'string').map((c) => c.text).join('\n');
}

export function toLuaValue(result) {
  if (result === null || typeof result !== 'object') return null;
  if (result.isError) {
    throw new Error(resultText(result) || 'the tool reported an error without text');
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return result.structuredContent;
  }
  const content = Array.isArray(result.content) ? result.content : [];
  if (content.length === 0) return null;
  if (content.every((c) => c?.type === 'text' && typeof c.text === 'string')) {
    const text = content.map((c) => c.text).join('\n');
    const t = text.trim();
    if (t !== '' && /^[[{"\-0-9tfn]/.test(t)) {
      try {
        return JSON.parse(t);
      } catch {
        // not JSON: the text itself
      }
    }
    return text;
  }
  return content;
}
