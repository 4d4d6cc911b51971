// sandboxd - the Node client for sandboxd (no runtime dependencies).
//
//   import { Client, ToolAbort, SandboxdError } from 'sandboxd';
//   const client = new Client();                    // $SANDBOXD_SOCKET or /run/sandboxd/sandboxd.sock
//   const r = await client.execute('return Weather.get("Paris").temp + 1',
//     { tools: { Weather: { get: async (city) => ({ temp: 21 }) } } });
//
// client.js has the API, connection.js the wire handling, tools.js the tool
// objects, json.js the value encoding, errors.js the error classes.
export { Client, Session } from './client.js';
export { encode as encodeJson } from './json.js';
export {
  SandboxdError, LuaError, LimitExceeded, Cancelled, ToolAborted, Busy, Forbidden,
  SessionNotFound, InvalidRequest, SandboxCrashed, DaemonUnavailable, Unsupported, ToolAbort,
} from './errors.js';
