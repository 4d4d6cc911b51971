// usage.ts - the whole public API as a TypeScript user writes it.  `tsc
// --noEmit` checks it against src/index.d.ts (make test-node), each
// `@ts-expect-error` proving a misuse is refused; test/types.test.mjs also
// runs it, transpiled, against the real daemon, so what it claims is true.

import {
  Client, Session, SandboxdError, LuaError, LimitExceeded, Cancelled, ToolAborted, Busy,
  Forbidden, SessionNotFound, InvalidRequest, SandboxCrashed, DaemonUnavailable, Unsupported,
  ToolAbort, encodeJson,
} from '../src/index.js';
import type {
  ExecuteResult, ExecuteOptions, Stats, ToolContext, Tools, Limits, Bindings, PromptInfo,
} from '../src/index.js';

interface Weather { city: string; temp: number }

export async function main(socketPath: string): Promise<string[]> {
  const log: string[] = [];
  const client = new Client({ socketPath, cancelGraceMs: 500, deadlineGraceMs: 1000 });
  const seen: ToolContext[] = [];
  const tools: Tools = {
    Weather: {
      __module: 'MyApp.Weather',
      get: {
        fn: async (city: string, ctx: ToolContext): Promise<Weather> => {
          seen.push(ctx);
          return { city, temp: 21 };
        },
        arities: [1],
      },
      stop: () => { throw new ToolAbort('enough'); },
    },
  };
  const limits: Limits = { max_heap: 50_000_000, cpu_ms: 'infinity', priority: 'normal' };
  const opts: ExecuteOptions = { tools, limits, timeoutMs: 5000, onOutput: (t) => log.push(`live ${t.trim()}`) };
  const r: ExecuteResult<number> = await client.execute<number>(
    'local w = Weather.get("Paris") print(w.city) n = w.temp return n + 1', opts);
  const n: number = r.value;
  const stats: Stats | null = r.stats;
  const names: string[] = r.bindingNames;
  log.push(`value ${n} output ${r.output.trim()} names ${names.join(',')} calls ${stats?.tool_calls}`);
  log.push(`ctx ${seen[0]?.tool}.${seen[0]?.function} ${seen[0]?.module} ${seen[0]?.signal.aborted}`);
  const bindings: Bindings = r.bindings;
  log.push(`again ${(await client.execute<number>('return n * 2', { bindings })).value}`);
  log.push(`names ${(await client.bindingNames(bindings)).join(',')}`);
  log.push(`check ${(await client.check('return 1')).ok}`);
  const info: PromptInfo = await client.promptInfo({ session: true });
  log.push(`language ${info.language}`);
  log.push(`ping ${JSON.stringify(await client.ping())}`);
  log.push(`workers ${typeof (await client.describe()).state.workers}`);
  const features: Set<string> = await client.features();
  log.push(`sessions ${features.has('sessions')}`);

  try {
    await client.execute('error("boom")');
  } catch (e) {
    if (e instanceof LuaError) log.push(`lua ${e.kind} line ${e.line} retry ${e.retryable}`);
  }
  try {
    await client.execute('Weather.stop()', { tools });
  } catch (e) {
    if (e instanceof ToolAborted && e.cause instanceof ToolAbort) log.push(`aborted ${e.cause.message}`);
  }
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 50);
  try {
    await client.execute('while true do end', { signal: ac.signal, deadlineMs: null });
  } catch (e) {
    if (e instanceof Cancelled) log.push(`cancelled ${e.kind}`);
  }
  const classes = [SandboxdError, LimitExceeded, Busy, Forbidden, SessionNotFound, InvalidRequest,
    SandboxCrashed, DaemonUnavailable, Unsupported];
  const err: SandboxdError = new LimitExceeded('x', { kind: 'timeout', code: -32003, data: {} });
  log.push(`classes ${classes.every((C) => err instanceof SandboxdError && typeof C === 'function')}`);
  log.push(`json ${encodeJson({ a: [1, 2.5] })}`);

  const s: Session = await client.session({ bindings: [['k', 1]], timeoutMs: 5000 });
  await s.execute('function inc() k = k + 1 return k end');
  const got = await s.execute<number>('return inc()', { returnBindings: true });
  const snap = await s.snapshot();
  log.push(`session ${got.value} ${snap.bindingNames.join(',')}`);
  await s[Symbol.asyncDispose]();
  await client[Symbol.asyncDispose]();

  // @ts-expect-error: the code is a string
  void (() => client.execute(42));
  // @ts-expect-error: a session chunk takes no tools
  void (() => s.execute('return 1', { tools }));
  // @ts-expect-error: no such option
  void (() => client.execute('return 1', { timeout: 5 }));
  // @ts-expect-error: close() returns nothing to await on
  void (() => client.close().then);
  return log;
}
