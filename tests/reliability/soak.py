"""soak.py - the reliability faults in a loop for minutes (`make soak`).

Usage: SANDBOXD_BIN=... /usr/bin/python3 tests/reliability/soak.py [SECONDS]
(default SOAK_SECONDS or 300).  One daemon runs the whole time under the
checked load of load.py; each round of ROUND seconds injects one fault kind
in turn (workers killed, workers stopped, the zygote killed, clients
vanishing in tool calls, SIGHUP).  After every round it prints the
supervisor's RSS and open descriptors; at the end the growth from the first
round to the last.  Exits 1 if any reply was lost, duplicated, misrouted or
wrong, if an error kind appeared that the round's fault cannot cause, or if
the supervisor's fds grew by more than 16 or its RSS by more than 32 MiB.
"""

import asyncio
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(0, HERE)

import sbx                                   # noqa: E402
from conftest import Daemon, merge_config    # noqa: E402
from load import Load                        # noqa: E402

ROUND = 10.0


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def quiet_kill(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def faults(d):
    def workers_killed():
        w = [p for p, _, st, _ in d.workers() if st not in ("Z", "T")]
        if w:
            quiet_kill(random.choice(w), signal.SIGKILL)

    def workers_stopped():
        w = [p for p, _, st, _ in d.workers() if st not in ("Z", "T")]
        if w and random.random() < 0.2:
            quiet_kill(random.choice(w), signal.SIGSTOP)

    def zygote_killed():
        if random.random() < 0.05:
            for pid, *_ in d.zygotes():
                quiet_kill(pid, signal.SIGKILL)

    def client_vanishes():
        c = sbx.Client(d.socket_path)
        c.send_execute('return T.echo(1, 1)', tools=[{"name": "T", "functions": ["echo"]}],
                       handlers={"T.echo": lambda *a: sbx.NO_REPLY})
        try:
            c.wait_deferred(1, timeout=20)
        finally:
            c.close()

    def reload():
        d.signal(signal.SIGHUP)

    return [("workers killed", workers_killed, {"crashed"}),
            ("workers stopped", workers_stopped, {"timeout", "crashed"}),
            ("zygote killed", zygote_killed, {"crashed"}),
            ("clients vanish in tool calls", client_vanishes, set()),
            ("reload", reload, set())]


async def round_(d, fault, seconds):
    load = Load(d.socket_path, connections=16, depth=2, timeout_ms=2000)
    task = asyncio.create_task(load.run(seconds))
    loop = asyncio.get_running_loop()
    while not task.done():
        await loop.run_in_executor(None, fault)
        await asyncio.sleep(0.05)
    return await task


def main():
    total = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("SOAK_SECONDS", 300))
    d = Daemon(config=merge_config(daemon={"max_workers": 8, "max_queue": 256, "pool_size": 2}))
    d.start()
    failures = []
    samples = []
    start = time.monotonic()
    try:
        kinds = faults(d)
        i = 0
        print("%-30s %8s %6s %6s %10s %6s" % ("round", "ok", "errors", "bad", "rss_kib", "fds"))
        while time.monotonic() - start < total:
            name, fault, allowed = kinds[i % len(kinds)]
            i += 1
            counts = asyncio.run(round_(d, fault, min(ROUND, total)))
            for pid, *_ in d.workers():
                quiet_kill(pid, signal.SIGCONT)
            samples.append((rss_kib(d.pid), fds(d.pid)))
            errs = sum(v for k, v in counts.errors.items() if k != "disconnected")
            print("%-30s %8d %6d %6d %10d %6d" % (name, counts.ok, errs, counts.bad(),
                                                  samples[-1][0], samples[-1][1]), flush=True)
            other = {k: v for k, v in counts.errors.items() if v and k not in allowed}
            if counts.bad() or other or not counts.ok:
                failures.append("%s: %r" % (name, counts))
            if not d.alive():
                failures.append("the daemon died: %s" % d.stderr[-2000:])
                break
        if len(samples) > 1:
            base = samples[min(1, len(samples) - 1)]       # after one round of warm-up
            drss, dfd = samples[-1][0] - base[0], samples[-1][1] - base[1]
            print("growth after warm-up: rss %+d KiB, fds %+d" % (drss, dfd))
            if dfd > 16:
                failures.append("supervisor fds grew by %d" % dfd)
            if drss > 32 * 1024:
                failures.append("supervisor RSS grew by %d KiB" % drss)
    finally:
        d.stop()
        d.cleanup()
    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (len(samples) - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
