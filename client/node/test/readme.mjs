// readme.mjs - what a README check needs: the README's fenced blocks and the
// commands in its prose, each claimed by exactly one check, so that a block
// or a command added without a check fails the suite (as tests/readme does
// for the top README).
//
//   const r = readme(path);
//   r.blocks            [{ lang, body }] of the fenced blocks, in order
//   r.commands(re)      the distinct `commands` in the prose matching re
//   claim(checks, lang, body)  the one check of `checks` ([[lang, start, fn]])
//                       whose lang and start match; throws naming the block

import fs from 'node:fs';

export function readme(file) {
  const text = fs.readFileSync(file, 'utf8');
  const blocks = [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)]
    .map((m) => ({ lang: m[1], body: m[2] }));
  const prose = text.replace(/^```[\s\S]*?^```/gm, '');
  return {
    text,
    blocks,
    commands(re) {
      const out = [];
      for (const m of prose.matchAll(new RegExp(`\`(${re.source})\``, 'g'))) {
        const c = m[1].replace(/\s+/g, ' ');
        if (!out.includes(c)) out.push(c);
      }
      return out;
    },
  };
}

export function claim(checks, lang, body) {
  const found = checks.filter(([l, start]) => l === lang && body.startsWith(start));
  if (found.length !== 1) {
    throw new Error(`no check in this suite for this \`\`\`${lang} block:\n${body}`);
  }
  return found[0][2];
}

/** The command lines of a ```sh block: comments and blank lines dropped. */
export function shLines(body) {
  return body.split('\n').map((l) => l.split(/\s+#/)[0].trim()).filter((l) => l && !l.startsWith('#'));
}
