// peers.mjs - the in-process JavaScript Lua VMs, as bench/run's peers.
//
//   node bench/jsvm/peers.mjs latency VM N        sequential: p50_us, p99_us
//   node bench/jsvm/peers.mjs tput VM N PROCS     PROCS processes at once: rate
//
// VM is fengari (Lua 5.3 in JavaScript) or wasmoon (Lua 5.4 in WebAssembly).
// Each execution is what a TypeScript framework that picks one of them would
// do for a model's chunk: a fresh VM with the standard libraries, the chunk
// `return 1+1` loaded and run, its value read back, the VM closed.  Nothing
// isolates the chunk from the host process.  Prints key=value lines, as
// bench/loadgen does.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const CODE = "return 1+1";

async function makeRunner(vm) {
  if (vm === "fengari") {
    const { lua, lauxlib, lualib, to_luastring } = (await import("fengari")).default;
    const code = to_luastring(CODE);
    return async () => {
      const L = lauxlib.luaL_newstate();
      lualib.luaL_openlibs(L);
      if (lauxlib.luaL_loadstring(L, code) !== lua.LUA_OK) throw new Error("load failed");
      if (lua.lua_pcall(L, 0, 1, 0) !== lua.LUA_OK) throw new Error("run failed");
      const v = lua.lua_tointeger(L, -1);
      lua.lua_close(L);
      if (v !== 2) throw new Error("wrong value " + v);
    };
  }
  if (vm === "wasmoon") {
    const { LuaFactory } = await import("wasmoon");
    const factory = new LuaFactory();
    return async () => {
      const engine = await factory.createEngine();
      const v = await engine.doString(CODE);
      engine.global.close();
      if (v !== 2) throw new Error("wrong value " + v);
    };
  }
  throw new Error("unknown VM " + vm);
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

async function latency(vm, n) {
  const run = await makeRunner(vm);
  for (let i = 0; i < Math.min(50, n); i++) await run();     // warm the JIT
  const us = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await run();
    us.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  us.sort((a, b) => a - b);
  console.log(`p50_us=${percentile(us, 50).toFixed(1)}`);
  console.log(`p99_us=${percentile(us, 99).toFixed(1)}`);
}

async function child(vm, n) {
  const run = await makeRunner(vm);
  for (let i = 0; i < Math.min(50, n); i++) await run();
  process.send({ ready: true });
  await new Promise((resolve) => process.once("message", resolve));
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await run();
  process.send({ ns: Number(process.hrtime.bigint() - t) });
}

async function tput(vm, n, procs) {
  const self = fileURLToPath(import.meta.url);
  const per = Math.ceil(n / procs);
  const kids = [];
  for (let i = 0; i < procs; i++) kids.push(fork(self, ["child", vm, String(per)]));
  await Promise.all(kids.map((k) => new Promise((resolve) => k.once("message", resolve))));
  const t = process.hrtime.bigint();
  const done = kids.map((k) => new Promise((resolve) => k.once("message", resolve)));
  for (const k of kids) k.send({ go: true });
  await Promise.all(done);
  const s = Number(process.hrtime.bigint() - t) / 1e9;
  console.log(`rate=${((per * procs) / s).toFixed(0)}`);
  console.log(`executions=${per * procs}`);
}

const [mode, vm, n, procs] = process.argv.slice(2);
if (mode === "latency") await latency(vm, Number(n));
else if (mode === "tput") await tput(vm, Number(n), Number(procs));
else if (mode === "child") await child(vm, Number(n));
else {
  console.error("usage: peers.mjs latency VM N | tput VM N PROCS");
  process.exit(2);
}
