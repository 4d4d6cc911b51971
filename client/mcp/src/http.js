// http.js - the bridge served over Streamable HTTP: one HostSession (its own
// SDK Server, Lua state and daemon session) per MCP session.
//
// serveHttp(bridge, {host, port} | {path}) listens on a TCP address or a Unix
// socket path with an Express app and the SDK's StreamableHTTPServerTransport
// at /mcp.  Bound to loopback or a path, the SDK's Host validation runs first
// (a Host other than localhost, 127.0.0.1 or [::1] is refused, against DNS
// rebinding, before the body is read).  A request body is read up to the
// bound maxBody() gives: the maxBody option, else the daemon's
// max_message_bytes as describe last reported it (an execute_lua call can
// carry no more to the daemon), else DEFAULT_MAX_BODY; a larger body is
// answered 413, and a body that is not JSON 400, each with a JSON-RPC error.
// An initialize request without Mcp-Session-Id opens an MCP session; the
// session ends, closing its daemon session, on DELETE, when its transport
// closes, or after idleMs without a request.  Nothing here authenticates or
// encrypts: anything beyond this machine goes through a proxy that does both
// (README).  Resolves { url, maxBody(), close() } once listening; rejects with
// one line that says why when it cannot listen (the address in use, or a path
// that is another's live socket or not a socket at all: only a stale socket
// file, which nobody answers on, is replaced).

import { randomUUID, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import express from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { localhostHostValidation } from '@modelcontextprotocol/sdk/server/middleware/hostHeaderValidation.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

// The SDK's transport names the Web Crypto global, which Node 18 lacks.
if (!globalThis.crypto) globalThis.crypto = webcrypto;

/** A host name or address of this machine's loopback interface. */
export const isLoopback = (h) => h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);

/** "PORT", "HOST:PORT", "[V6]:PORT" or a path (with a "/") to {host, port} or {path}. */
export function parseAddress(a) {
  if (a.includes('/')) return { path: a };
  const m = /^(?:(\[[0-9A-Fa-f:.]+\]|[^:[\]]+):)?([0-9]{1,5})$/.exec(a);
  if (!m || Number(m[2]) > 65535) throw new Error(`"${a}" is not PORT, HOST:PORT or a socket path`);
  return { host: (m[1] ?? '127.0.0.1').replace(/^\[(.*)\]$/, '$1'), port: Number(m[2]) };
}

function rpcError(res, status, message, code = -32000) {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

export const IDLE_MS = 3600000;
/** The bound on a request body when neither the option nor the daemon gives one: the daemon's default max_message_bytes. */
export const DEFAULT_MAX_BODY = 16 * 1024 * 1024;

/** The JSON body parser for the bound in force, made again only when the bound changes. */
function jsonBody(maxBody) {
  let parser = null;
  let limit = 0;
  return (req, res, next) => {
    if (maxBody() !== limit) {
      limit = maxBody();
      parser = express.json({ limit });
    }
    parser(req, res, next);
  };
}

/** A body-parser error (or any other) as a JSON-RPC error, never Express's HTML page. */
function bodyError(maxBody, log) {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err.type === 'entity.too.large') {
      return rpcError(res, 413, `Payload Too Large: the request body is over ${maxBody()} bytes, ` +
        "the bridge's bound (--http-max-body, else the daemon's max_message_bytes)");
    }
    if (err.type === 'entity.parse.failed') return rpcError(res, 400, 'Parse error: the request body is not JSON', -32700);
    const status = Number.isInteger(err.status) && err.status >= 400 && err.status < 600 ? err.status : 500;
    if (status === 500) log(`HTTP ${req.method} ${req.path}: ${err.message}`);
    return rpcError(res, status, err.expose ? err.message : 'internal error');
  };
}

/** A socket file nobody answers on is removed; a live one, or a path that is not a socket, refused. */
async function clearSocketPath(p) {
  let st;
  try {
    st = fs.lstatSync(p);
  } catch (e) {
    if (e.code === 'ENOENT') return;
    throw new Error(`cannot listen on ${p}: ${e.message}`);
  }
  if (!st.isSocket()) throw new Error(`cannot listen on ${p}: it exists and is not a socket`);
  const live = await new Promise((resolve) => {
    const s = net.connect(p, () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
  if (live) throw new Error(`cannot listen on ${p}: it is in use (something answers on that socket)`);
  fs.rmSync(p, { force: true });
}

const LISTEN_ERRORS = {
  EADDRINUSE: 'the address is in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'no interface of this machine has that address',
};

/**
 * @param {object} opts
 * @param {number} [opts.maxBody]  bytes; default the daemon's max_message_bytes, else DEFAULT_MAX_BODY
 */
export async function serveHttp(bridge, { host, port, path, idleMs = IDLE_MS, maxBody: fixed, log = bridge.log } = {}) {
  const maxBody = () => fixed ?? bridge.daemon?.daemon?.max_message_bytes ?? DEFAULT_MAX_BODY;
  const app = express();
  if (path || isLoopback(host)) app.use(localhostHostValidation());
  else log(`--http ${host}: not loopback, so no Host validation against DNS rebinding: the proxy in front must authenticate`);
  app.use(jsonBody(maxBody));
  const sessions = new Map(); // Mcp-Session-Id -> { transport, host, timer }

  const touch = (s) => {
    clearTimeout(s.timer);
    s.timer = setTimeout(() => {
      log(`MCP session ${s.transport.sessionId}: no request for ${idleMs} ms; closed`);
      s.transport.close().catch(() => {});
    }, idleMs);
    s.timer.unref();
  };

  app.all('/mcp', async (req, res) => {
    const id = req.headers['mcp-session-id'];
    let s = typeof id === 'string' ? sessions.get(id) : undefined;
    try {
      if (!s) {
        if (id !== undefined) return rpcError(res, 404, 'no such MCP session (it ended, or the bridge restarted)');
        if (req.method !== 'POST' || !isInitializeRequest(req.body)) {
          return rpcError(res, 400, 'no Mcp-Session-Id: the first request of a session is initialize');
        }
        const transport = new StreamableHTTPServerTransport({
          maxRequestBodySize: maxBody(), // for a body it reads itself (one express.json() left alone)
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => {
            sessions.set(sid, s);
            touch(s);
          },
          onsessionclosed: () => { transport.close().catch(() => {}); },
        });
        s = { transport, host: null, timer: null };
        transport.onclose = () => {
          clearTimeout(s.timer);
          if (transport.sessionId) sessions.delete(transport.sessionId);
        };
        s.host = await bridge.connect(transport);
      } else {
        touch(s);
      }
      await s.transport.handleRequest(req, res, req.body);
      // an initialize the transport refused opened no session: nothing will reach it again
      if (!s.transport.sessionId) await s.transport.close();
    } catch (e) {
      log(`HTTP ${req.method} /mcp: ${e.message}`);
      if (!res.headersSent) rpcError(res, 500, 'internal error');
    }
  });

  app.use(bodyError(maxBody, log));

  if (path) await clearSocketPath(path);
  const server = http.createServer(app);
  await new Promise((resolve, reject) => {
    server.once('error', (e) => {
      const where = path ?? `${host.includes(':') ? `[${host}]` : host}:${port}`;
      reject(new Error(`cannot listen on ${where}: ${LISTEN_ERRORS[e.code] ?? e.message}`));
    });
    server.listen(...(path ? [path] : [port, host]), resolve);
  });
  let url;
  if (path) {
    url = `unix:${path}`;
  } else {
    const a = server.address();
    url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/mcp`;
  }
  return {
    url,
    sessions,
    maxBody,
    async close() {
      await Promise.allSettled([...sessions.values()].map((x) => x.transport.close()));
      server.closeAllConnections?.();
      await new Promise((r) => server.close(() => r()));
      if (path) fs.rmSync(path, { force: true });
    },
  };
}
