#!/usr/bin/python3
"""bench/message_memory.py - the supervisor's peak memory for one maximal
message, as a ratio to the message's size (the baseline, measured in the
same run: the bytes themselves).

  bench/message_memory.py [--sandboxd PATH]

Starts a daemon (max_message_bytes 16 MiB) and, for each shape, resets the
supervisor's peak RSS (clear_refs 5), sends one message or has a chunk
produce one, and prints: shape, message bytes, peak growth, ratio, RSS kept
afterwards.  Shapes: client lines of `[[],[],...]` and `[1,1,...]` (refused
by a count of what their trees would take at least) and of one object with
a million distinct keys (refused at its parse budget), a tool answer of numbers (passes through), bindings of a large
table (pass through), a chunk's value of millions of references to one
table (passes through), a tool call's args of the same (passes through).
Target: at most 4x.  A report, not an assertion: exit 0 when every
shape ran.  Stdlib only.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20

CONFIG = """[daemon]
max_message_bytes = 16M
pool_size = 0
[defaults]
timeout_ms = 300000
max_heap = 600000000
[ceilings]
timeout_ms = 600000
"""


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(key)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj_or_bytes):
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else \
            json.dumps(obj_or_bytes).encode() + b"\n"
        self.s.sendall(data)

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("EOF")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandboxd", default=os.path.join(HERE, "..", "build", "sandboxd"))
    args = ap.parse_args()
    print("%-34s %10s %13s %7s %11s  %s" % ("shape", "bytes", "peak growth", "ratio",
                                           "kept", "outcome"))
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":['
    dense = head + b",".join([b"[]"] * ((16 * MIB - len(head) - 8) // 3)) + b"]}}\n"
    scalars = head + b",".join([b"1"] * ((16 * MIB - len(head) - 8) // 2)) + b"]}}\n"
    ohead = head[:-1] + b"{"
    members = ohead + b",".join(b'"k%010d":1' % i
                                for i in range((16 * MIB - len(ohead) - 8) // 16)) + b"}}}\n"
    nums = b",".join([b"0.3"] * 4000000)
    tool = [{"name": "T", "functions": ["f"]}]
    shapes = [
        ("client line [[],[],...]", len(dense), lambda c: send_line(c, dense)),
        ("client line [1,1,...]", len(scalars), lambda c: send_line(c, scalars)),
        ("client line {1M distinct keys}", len(members), lambda c: send_line(c, members)),
        ("tool answer 4M reals", len(nums), lambda c: execute_raw_tool(c, nums)),
        ("bindings: table of 300k integers", 4 * 10 ** 6,
         lambda c: execute(c, "t = {} for i = 1, 300000 do t[i] = i end return 1")),
        ("value: 5M references to one table", 15 * 10 ** 6,
         lambda c: execute(c, "local t, r = {}, {} for i = 1, 5000000 do r[i] = t end return r")),
        ("tool args: 5M references", 15 * 10 ** 6,
         lambda c: execute(c, "local t, r = {}, {} for i = 1, 5000000 do r[i] = t end "
                              "return T.f(r)", tool, lambda p: len(p["args"][0]))),
    ]
    for name, size, run in shapes:          # a fresh daemon for each: nothing reused
        measure(args.sandboxd, name, size, run)
    print("target: peak growth at most 4x the message")


def measure(binary, name, size, run):
    tmp = tempfile.mkdtemp(prefix="sbx-mem-")
    conf, sock = os.path.join(tmp, "c.conf"), os.path.join(tmp, "s.sock")
    with open(conf, "w") as f:
        f.write(CONFIG)
    d = subprocess.Popen([binary, "-c", conf, "-s", sock], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        time.sleep(0.2)
        c = Conn(sock)
        c.send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        c.line()
        rss0 = status_kib(d.pid, "VmRSS")
        with open("/proc/%d/clear_refs" % d.pid, "w") as f:
            f.write("5")
        outcome = run(c)
        c.send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        c.line()
        peak = (status_kib(d.pid, "VmHWM") - rss0) << 10
        kept = (status_kib(d.pid, "VmRSS") - rss0) << 10
        print("%-34s %10d %10.1f MB %6.1fx %8.1f MB  %s"
              % (name, size, peak / 1e6, peak / size, kept / 1e6, outcome))
    finally:
        d.terminate()
        d.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def send_line(c, line):
    c.send(line)
    m = c.line()
    return m["error"]["data"]["kind"] if "error" in m else "ok"


def execute(c, code, tools=None, handler=None):
    params = {"code": code, "limits": {"max_bindings_bytes": 16 * MIB}}
    if tools:
        params["tools"] = tools
    c.send({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": params})
    while True:
        m = c.line()
        if m.get("method") == "tool/call":
            c.send({"jsonrpc": "2.0", "id": m["id"], "result": handler(m["params"])})
            continue
        return "ok" if "result" in m else m["error"]["data"]["kind"]


def execute_raw_tool(c, payload):
    """A tool answer sent as raw bytes (payload is the JSON array's inside)."""
    c.send({"jsonrpc": "2.0", "id": 1, "method": "execute",
            "params": {"code": "return #T.f()", "tools": [{"name": "T", "functions": ["f"]}]}})
    while True:
        m = c.line()
        if m.get("method") == "tool/call":
            c.send(b'{"jsonrpc":"2.0","id":"%s","result":[%s]}\n' % (m["id"].encode(), payload))
            continue
        return "ok" if "result" in m else m["error"]["data"]["kind"]


if __name__ == "__main__":
    sys.exit(main())
