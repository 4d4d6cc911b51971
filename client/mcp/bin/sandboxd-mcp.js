#!/usr/bin/env node
// sandboxd-mcp - an MCP server with one tool, execute_lua, whose Lua (run in
// sandboxd) calls the tools of the MCP servers in SERVERS.json.
//
//   sandboxd-mcp --config SERVERS.json [--socket PATH] [--timeout-ms N] [--max-result-chars N]
//                [--catalog-chars N] [--queue-wait-ms N] [--idle-timeout-ms N] [--no-sessions]
//                [--priority low|normal|high] [--confirm destructive|all|none]
//                [--without-elicitation refuse|allow] [--http ADDRESS [--allow-remote]
//                [--http-session-idle-ms N] [--http-max-body BYTES]]
//
// SERVERS.json: {"mcpServers": {"NAME": {"command": "...", "args": [...],
// "env": {...}} or {"url": "...", "headers": {...}, "type": "http"|"sse"},
// each with optional "allow", "deny", "confirm"}} (the shape MCP hosts use).
// Serves over stdio, and stops, with its downstream servers, when the host
// closes stdin; with --http over Streamable HTTP at http://ADDRESS/mcp (or a
// Unix socket path), until SIGTERM/SIGINT.  Messages of the bridge itself go
// to stderr.

import fs from 'node:fs';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Bridge, VERSION, UNCONFIRMED } from '../src/bridge.js';
import { CONFIRM } from '../src/downstream.js';
import { MIN_RESULT_CHARS } from '../src/render.js';
import { serveHttp, parseAddress, isLoopback } from '../src/http.js';

const USAGE = 'usage: sandboxd-mcp --config SERVERS.json [--socket PATH] [--timeout-ms N] [--max-result-chars N]\n' +
  '                    [--catalog-chars N] [--queue-wait-ms N] [--idle-timeout-ms N] [--no-sessions]\n' +
  '                    [--priority low|normal|high] [--confirm destructive|all|none]\n' +
  '                    [--without-elicitation refuse|allow] [--http ADDRESS] [--allow-remote]\n' +
  '                    [--http-session-idle-ms 3600000] [--http-max-body BYTES]\n' +
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
    else if (a === '--confirm') {
      o.confirm = val();
      if (!CONFIRM.includes(o.confirm)) die(`--confirm takes ${CONFIRM.join(', ')}, not "${o.confirm}"`);
    }
    else if (a === '--without-elicitation') {
      o.withoutElicitation = val();
      if (!UNCONFIRMED.includes(o.withoutElicitation)) {
        die(`--without-elicitation takes ${UNCONFIRMED.join(' or ')}, not "${o.withoutElicitation}"`);
      }
    }
    else if (a === '--http') {
      try {
        o.http = parseAddress(val());
      } catch (e) {
        die(`--http: ${e.message}`);
      }
    }
    else if (a === '--allow-remote') o.allowRemote = true;
    else if (a === '--http-session-idle-ms') o.httpIdleMs = num(val());
    else if (a === '--http-max-body') {
      o.httpMaxBody = num(val());
      if (o.httpMaxBody < 1) die('--http-max-body must be at least 1');
    }
    else if (a === '--version') { process.stdout.write(`sandboxd-mcp ${VERSION}\n`); process.exit(0); }
    else if (a === '--help' || a === '-h') { process.stdout.write(`${USAGE}\n`); process.exit(0); }
    else die(`unknown argument "${a}"\n${USAGE}`);
  }
  if (!o.config) die(`--config is required\n${USAGE}`);
  if (o.http?.host && !isLoopback(o.http.host) && !o.allowRemote) {
    die(`--http ${o.http.host}: not a loopback address. The bridge neither authenticates nor encrypts: ` +
      'serve it on 127.0.0.1 behind a proxy that does both, or add --allow-remote if that proxy is elsewhere');
  }
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
    confirm: opts.confirm,
    withoutElicitation: opts.withoutElicitation,
  });
} catch (e) {
  die(`${opts.config}: ${e.message}`, 1);
}

let stopping = false;
let http = null;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  const t = setTimeout(() => process.exit(code), 5000);
  t.unref();
  await http?.close().catch(() => {});
  await bridge.close().catch(() => {});
  process.exit(code);
}
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));

await bridge.start();
if (opts.http) {
  try {
    http = await serveHttp(bridge, { ...opts.http, idleMs: opts.httpIdleMs, maxBody: opts.httpMaxBody });
  } catch (e) {
    process.stderr.write(`sandboxd-mcp: --http: ${e.message}\n`);
    await stop(1);
  }
  if (http) process.stderr.write(`sandboxd-mcp: serving execute_lua over Streamable HTTP at ${http.url} ` +
    `(${bridge.catalog.length} server(s); request bodies up to ${http.maxBody()} bytes)\n`);
} else {
  process.stdin.on('end', () => stop(0));
  process.stdin.on('close', () => stop(0));
  const transport = new StdioServerTransport();
  transport.onclose = () => stop(0);
  await bridge.connect(transport);
  process.stderr.write(`sandboxd-mcp: serving execute_lua over stdio (${bridge.catalog.length} server(s))\n`);
}
