// http.js - the bridge served over Streamable HTTP: one HostSession (its own
// SDK Server, Lua state and daemon session) per MCP session.
//
// serveHttp(bridge, {host, port} | {path}) listens on a TCP address or a Unix
// socket path with the SDK's Express app (createMcpExpressApp: a Host header
// other than localhost, 127.0.0.1 or [::1] is refused when bound to loopback,
// against DNS rebinding) and the SDK's StreamableHTTPServerTransport at /mcp.
// An initialize request without Mcp-Session-Id opens an MCP session; the
// session ends, closing its daemon session, on DELETE, when its transport
// closes, or after idleMs without a request.  Nothing here authenticates or
// encrypts: anything beyond this machine goes through a proxy that does both
// (README).  Resolves { url, close() } once listening.

import { randomUUID, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
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

function rpcError(res, status, message) {
  res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

export const IDLE_MS = 3600000;

export async function serveHttp(bridge, { host, port, path, idleMs = IDLE_MS, log = bridge.log } = {}) {
  const app = createMcpExpressApp({ host: path || isLoopback(host) ? '127.0.0.1' : host });
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

  if (path) fs.rmSync(path, { force: true });
  const server = await new Promise((resolve, reject) => {
    const srv = app.listen(...(path ? [path] : [port, host]), () => resolve(srv));
    srv.once('error', reject);
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
    async close() {
      await Promise.allSettled([...sessions.values()].map((x) => x.transport.close()));
      server.closeAllConnections?.();
      await new Promise((r) => server.close(() => r()));
      if (path) fs.rmSync(path, { force: true });
    },
  };
}
