#!/usr/bin/env node
// sandboxd-mcp - an MCP server over stdio with one tool, execute_lua, whose
// Lua (run in sandboxd) calls the tools of the MCP servers in SERVERS.json.
//
//   sandboxd-mcp --config SERVERS.json [--socket PATH] [--timeout-ms N] [--max-result-chars N]
//                [--catalog-chars N] [--queue-wait-ms N] [--idle-timeout-ms N] [--no-sessions]
//                [--priority low|normal|high]
//
// SERVERS.json: {"mcpServers": {"NAME": {"command": "...", "args": [...],
// "env": {...}, "allow": [...], "deny": [...]}}} (the shape MCP hosts use).
// Stops, with its downstream servers, when the host closes stdin or on
// SIGTERM/SIGINT.  Messages of the bridge itself go to stderr.

import fs from 'node:fs';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Bridge, VERSION } from '../src/bridge.js';
import { MIN_RESULT_CHARS } from '../src/render.js';

const USAGE = 'usage: sandboxd-mcp --config SERVERS.json [--socket PATH] [--timeout-ms N] [--max-result-chars N]\n' +
  '                    [--catalog-chars N] [--queue-wait-ms N] [--idle-timeout-ms N] [--no-sessions]\n' +
  '                    [--priority low|normal|high]\n' +
  'Under the MCP Inspector, whose own --config would take this one, put -- before node:\n' +
  '  npx @modelcontextprotocol/inspector --cli --method tools/list -- node sandboxd-mcp.js --config SERVERS.json';

function die(msg, code = 2) {
  process.stderr.write(`sandboxd-mcp: ${msg}\n`);
  process.exit(code);
}

function parse(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) die(`${a} needs a value\n${USAGE}`);
      return argv[++i];
    };
    const num = (v) => {
      if (!/^[0-9]+$/.test(v)) die(`${a} needs a number, not "${v}"`);
      return Number(v);
    };
    if (a === '--config' || a === '-c') o.config = val();
    else if (a === '--socket' || a === '-s') o.socket = val();
    else if (a === '--timeout-ms') o.timeoutMs = num(val());
    else if (a === '--max-result-chars') {
      o.maxResultChars = num(val());
      if (o.maxResultChars < MIN_RESULT_CHARS) die(`--max-result-chars must be at least ${MIN_RESULT_CHARS}`);
    }
    else if (a === '--catalog-chars') o.catalogChars = num(val());
    else if (a === '--queue-wait-ms') o.queueWaitMs = num(val());
    else if (a === '--idle-timeout-ms') o.idleTimeoutMs = num(val());
    else if (a === '--no-sessions') o.sessions = false;
    else if (a === '--priority') {
      o.priority = val();
      if (!['low', 'normal', 'high'].includes(o.priority)) die(`--priority takes low, normal or high, not "${o.priority}"`);
    }
    else if (a === '--version') { process.stdout.write(`sandboxd-mcp ${VERSION}\n`); process.exit(0); }
    else if (a === '--help' || a === '-h') { process.stdout.write(`${USAGE}\n`); process.exit(0); }
    else die(`unknown argument "${a}"\n${USAGE}`);
  }
  if (!o.config) die(`--config is required\n${USAGE}`);
  return o;
}

const opts = parse(process.argv.slice(2));
let config;
try {
  config = JSON.parse(fs.readFileSync(opts.config, 'utf8'));
} catch (e) {
  die(`cannot read ${opts.config}: ${e.message}`, 1);
}

let bridge;
try {
  bridge = new Bridge({
    config,
    socketPath: opts.socket,
    timeoutMs: opts.timeoutMs,
    maxResultChars: opts.maxResultChars,
    catalogChars: opts.catalogChars,
    queueWaitMs: opts.queueWaitMs,
    idleTimeoutMs: opts.idleTimeoutMs,
    sessions: opts.sessions,
    limits: opts.priority ? { priority: opts.priority } : undefined,
  });
} catch (e) {
  die(`${opts.config}: ${e.message}`, 1);
}

let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  const t = setTimeout(() => process.exit(code), 5000);
  t.unref();
  await bridge.close().catch(() => {});
  process.exit(code);
}
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));
process.stdin.on('end', () => stop(0));
process.stdin.on('close', () => stop(0));

await bridge.start();
const transport = new StdioServerTransport();
transport.onclose = () => stop(0);
await bridge.connect(transport);
process.stderr.write(`sandboxd-mcp: serving execute_lua over stdio (${bridge.catalog.length} server(s))\n`);
