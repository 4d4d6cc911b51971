// setup.mjs - what every host test needs: the real daemon on a temporary
// socket, a servers.json with the toy downstream server (its tool env asks
// the user first), and the bridge's command line as an MCP host config gives it.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon, SCALE, until } from '../../../node/test/daemon.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const MCP = path.resolve(HERE, '..', '..');
export const BRIDGE = path.join(MCP, 'bin', 'sandboxd-mcp.js');
export const TOY = path.join(MCP, 'test', 'fixtures', 'toy-server.mjs');
export const BIN = path.join(HERE, '..', 'node_modules', '.bin');
export { SCALE, until };

/**
 * Start a daemon and write a servers.json; returns { daemon, dir, servers,
 * bridgeArgs(extra) -> the bridge's args, stop() }.
 */
export async function setup(marker) {
  const daemon = await startDaemon();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbxhost-'));
  const servers = path.join(dir, 'servers.json');
  fs.writeFileSync(servers, JSON.stringify({
    // toy.env needs the user's confirmation: these hosts cannot ask, so it is refused
    mcpServers: { toy: { command: process.execPath, args: [TOY, marker], confirm: ['env'] } },
  }));
  return {
    daemon,
    dir,
    servers,
    bridgeArgs: (extra = []) => [BRIDGE, '--config', servers, '--socket', daemon.socketPath, ...extra],
    async stop() {
      await daemon.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The first line of what a model reads when toy.env is refused (the host has no elicitation). */
export const REFUSED = 'error (runtime_error): toy.env: not run: this call needs the user\'s confirmation ' +
  '(its server\'s "confirm" list names it), and this MCP host cannot ask for it (it has no elicitation)';
