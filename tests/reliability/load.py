"""load.py - a many-connection load with exact reply checking, for the reliability suite.

Stdlib only (asyncio).  Load(socket_path, ...) runs `connections` client
connections against one daemon; each keeps `depth` executions in flight.
Every execute carries a nonce N: its code calls the tool T.echo(N, i) for
i = 1..calls, prints "out-N" and returns {n = N, acc = {...}}; the client's
tool answers are "N:i".  So every reply is derived from its request, and the
checker counts, per reply:

  ok          the value, the output and stats.tool_calls are exactly right
  errors      an error reply, by data.kind (the caller decides which kinds a
              fault may legitimately cause)
  wrong       a result whose value or output is not the one its nonce implies
              (a misrouted or corrupted reply)
  duplicated  a second reply to one request id
  unknown     a reply to an id this connection never sent
  misrouted   a tool/call whose execution_id is not one of this connection's
              open executions, or whose arguments carry another nonce
  lost        a request that had no reply when the connection ended (closed
              by the daemon, or when the load stopped and the daemon had
              `settle` seconds to answer)

Faults are the caller's business: it runs Load.run() as a task and injects
faults meanwhile.  Connections that the daemon closes are reopened (a
request sent on a closed connection is counted under errors["disconnected"],
never as lost, when the daemon closed it first: docs/protocol.md §6 says
closing the connection cancels what it started).
"""

import asyncio
import collections
import itertools
import json
import random

TOOLS = [{"name": "T", "functions": [{"name": "echo", "arities": [2]}]}]

CODE = """local n, k = %d, %d
local acc = {}
for i = 1, k do acc[i] = T.echo(n, i) end
print("out-" .. n)
return {n = n, acc = acc}"""


def expected(n, k):
    return {"n": n, "acc": ["%d:%d" % (n, i) for i in range(1, k + 1)]} if k else \
        {"n": n, "acc": []}


class Counts:
    def __init__(self):
        self.sent = 0
        self.ok = 0
        self.wrong = 0
        self.duplicated = 0
        self.unknown = 0
        self.misrouted = 0
        self.lost = 0
        self.tool_calls = 0
        self.errors = collections.Counter()
        self.examples = []          # a few descriptions of bad replies

    def note(self, what):
        if len(self.examples) < 10:
            self.examples.append(what)

    def bad(self):
        return self.wrong + self.duplicated + self.unknown + self.misrouted + self.lost

    def __repr__(self):
        return ("sent=%d ok=%d errors=%s wrong=%d duplicated=%d unknown=%d misrouted=%d "
                "lost=%d tool_calls=%d examples=%s" % (
                    self.sent, self.ok, dict(self.errors), self.wrong, self.duplicated,
                    self.unknown, self.misrouted, self.lost, self.tool_calls, self.examples))


class Conn:
    """One connection: a reader that always reads, executes in flight by id."""

    def __init__(self, load, cid):
        self.load = load
        self.cid = cid
        self.pending = {}           # id -> (nonce, calls)
        self.answered = set()
        self.reader = None
        self.writer = None
        self.closed = asyncio.Event()

    async def open(self):
        self.reader, self.writer = await asyncio.open_unix_connection(
            self.load.path, limit=1 << 26)
        self.closed.clear()

    def send(self, obj):
        self.writer.write((json.dumps(obj, separators=(",", ":")) + "\n").encode())

    async def read_loop(self):
        c = self.load.counts
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                msg = json.loads(line)
                if msg.get("method") == "tool/call":
                    await self.tool_call(msg)
                    continue
                if "id" not in msg:
                    continue            # a notification (live output): not checked here
                rid = msg["id"]
                if rid in self.answered:
                    c.duplicated += 1
                    c.note("duplicate reply to %r" % rid)
                    continue
                if rid not in self.pending:
                    c.unknown += 1
                    c.note("reply to unknown id %r" % rid)
                    continue
                n, k = self.pending.pop(rid)
                self.answered.add(rid)
                if "error" in msg:
                    c.errors[msg["error"].get("data", {}).get("kind", "?")] += 1
                    continue
                res = msg.get("result", {})
                if (res.get("value") == expected(n, k) and res.get("output") == "out-%d\n" % n
                        and res.get("stats", {}).get("tool_calls") == k):
                    c.ok += 1
                else:
                    c.wrong += 1
                    c.note("request %r (nonce %d) got %r" % (rid, n, str(res)[:200]))
        except (ConnectionError, OSError, ValueError):
            pass
        finally:
            self.closed.set()

    async def tool_call(self, msg):
        c = self.load.counts
        p = msg.get("params", {})
        args = p.get("args", [])
        eid = p.get("execution_id")
        c.tool_calls += 1
        if eid not in self.pending or not args or args[0] != self.pending[eid][0]:
            c.misrouted += 1
            c.note("tool/call %r for %r args %r" % (msg.get("id"), eid, args))
        if self.load.tool_delay:
            await asyncio.sleep(random.random() * self.load.tool_delay)
        if self.load.slow_reader and random.random() < 0.1:
            await asyncio.sleep(0.05)
        try:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": "%s:%s" % tuple(args[:2])})
        except (ConnectionError, OSError, RuntimeError, TypeError):
            pass

    def lose_pending(self, why):
        """The connection ended: what it still waited for is counted."""
        c = self.load.counts
        if why == "daemon":
            c.errors["disconnected"] += len(self.pending)
        else:
            c.lost += len(self.pending)
            for rid in list(self.pending)[:3]:
                c.note("no reply to %r on connection %d" % (rid, self.cid))
        self.pending.clear()


class Load:
    def __init__(self, path, connections=8, depth=2, calls=(0, 3), timeout_ms=10000,
                 tool_delay=0.0, slow_reader=False, settle=15.0):
        self.path = path
        self.connections = connections
        self.depth = depth
        self.calls = calls
        self.timeout_ms = timeout_ms
        self.tool_delay = tool_delay
        self.slow_reader = slow_reader
        self.settle = settle
        self.counts = Counts()
        self.stop = asyncio.Event()
        self.nonce = itertools.count(1)
        self.conns = []
        self.reconnects = 0

    async def client(self, cid):
        ids = itertools.count(1)
        conn = Conn(self, cid)
        self.conns.append(conn)
        while not self.stop.is_set():
            try:
                await conn.open()
            except (ConnectionError, OSError, FileNotFoundError):
                await asyncio.sleep(0.05)       # the daemon is restarting, or refused us
                continue
            task = asyncio.create_task(conn.read_loop())
            try:
                while not self.stop.is_set() and not conn.closed.is_set():
                    while len(conn.pending) < self.depth and not self.stop.is_set():
                        n = next(self.nonce)
                        k = random.randint(*self.calls)
                        rid = "c%d-%d" % (cid, next(ids))
                        conn.pending[rid] = (n, k)
                        self.counts.sent += 1
                        conn.send({"jsonrpc": "2.0", "id": rid, "method": "execute",
                                   "params": {"code": CODE % (n, k), "tools": TOOLS,
                                              "timeout_ms": self.timeout_ms}})
                    await conn.writer.drain()
                    await asyncio.sleep(0.001)
            except (ConnectionError, OSError, RuntimeError):
                pass
            if self.stop.is_set() and not conn.closed.is_set():
                try:
                    await asyncio.wait_for(self._drained(conn), self.settle)
                except asyncio.TimeoutError:
                    pass
            if conn.closed.is_set():
                conn.lose_pending("daemon")
                self.reconnects += 1
            else:
                conn.lose_pending("stopped")
            task.cancel()
            try:
                conn.writer.close()
            except Exception:
                pass
        return conn

    async def _drained(self, conn):
        while conn.pending and not conn.closed.is_set():
            await asyncio.sleep(0.01)

    async def run(self, seconds):
        tasks = [asyncio.create_task(self.client(i)) for i in range(self.connections)]
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        finally:
            self.stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.counts
