"""The reliability suite: a real daemon under many-connection load, with faults.

Each test runs load.Load (every reply checked against its request's nonce, so
a lost, duplicated, misrouted or corrupted reply is counted) while it injects
one kind of fault, then requires:
  - nothing lost, duplicated, misrouted or wrong;
  - only the error kinds that fault may legitimately cause;
  - the daemon alive and serving afterwards, with no leftover worker.
Bounded: about a minute in all (RELIABILITY_SECONDS scales each load phase).
`make soak` runs the same faults in a loop for minutes (soak.py).
"""

import asyncio
import ctypes
import os
import random
import resource
import signal
import socket
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import sbx                                    # noqa: E402
from conftest import Daemon, merge_config     # noqa: E402
from load import Load                          # noqa: E402

SCALE = sbx.SCALE
PHASE = float(os.environ.get("RELIABILITY_SECONDS", "4")) * SCALE

CONFIG = dict(daemon={"max_workers": 8, "max_queue": 256, "pool_size": 2,
                      "shutdown_grace_ms": 3000 * SCALE})


@pytest.fixture
def daemon():
    made = []

    def make(**sections):
        cfg = dict(CONFIG)
        for k, v in sections.items():
            cfg[k] = dict(cfg.get(k, {}), **v)
        d = Daemon(config=merge_config(**cfg))
        made.append(d)
        d.start()
        return d
    yield make
    for d in made:
        if d.alive():
            d.stop()
        d.check_sanitizers()
        d.cleanup()


def run_load(load, seconds, fault=None, interval=0.05):
    """Run load for seconds; call fault() every interval meanwhile."""
    async def main():
        task = asyncio.create_task(load.run(seconds))
        loop = asyncio.get_running_loop()
        while not task.done():
            if fault:       # in a thread: a fault may block, the load must not
                await loop.run_in_executor(None, fault)
            await asyncio.sleep(interval)
        return await task
    return asyncio.run(main())


def assert_clean(counts, allowed=()):
    assert counts.bad() == 0, counts
    others = {k: v for k, v in counts.errors.items() if v and k not in allowed}
    assert not others, "unexpected error kinds: %r" % (counts,)
    assert counts.ok > 0, counts


def assert_serving(d, allowed_idle=None):
    d.assert_alive()
    c = d.client()
    r = c.execute("return 6 * 7", timeout=30 * SCALE)
    assert r.ok and r.result["value"] == 42, r
    c.close()
    d.assert_no_leftovers(timeout=5 * SCALE,
                          allowed_idle=d.config["daemon"]["pool_size"]
                          if allowed_idle is None else allowed_idle)


def live_workers(d):
    return [p for p, _, state, _ in d.workers() if state not in ("Z", "T")]


def kill_quietly(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def test_steady_load(daemon):
    d = daemon()
    counts = run_load(Load(d.socket_path, connections=16, depth=2), PHASE)
    assert_clean(counts)
    assert_serving(d)


def test_workers_killed_under_load(daemon):
    d = daemon()

    def fault():
        w = live_workers(d)
        if w:
            kill_quietly(random.choice(w), signal.SIGKILL)
    counts = run_load(Load(d.socket_path, connections=12, depth=2), PHASE, fault)
    assert counts.errors["crashed"] > 0, counts      # the faults did hit executions
    assert_clean(counts, allowed={"crashed"})
    assert_serving(d)


def test_zygote_killed_under_load(daemon):
    d = daemon()
    kills = []

    def fault():
        if len(kills) < 3 and (not kills or time.monotonic() - kills[-1] > PHASE / 4):
            zygotes = [pid for pid, _, state, _ in d.zygotes() if state != "Z"]
            for pid in zygotes:
                kill_quietly(pid, signal.SIGKILL)
            if zygotes:
                kills.append(time.monotonic())
    counts = run_load(Load(d.socket_path, connections=12, depth=2), PHASE, fault)
    assert len(kills) == 3
    # A worker handed over just before its zygote died still runs its job;
    # nothing else may fail.
    assert_clean(counts, allowed={"crashed"})
    assert_serving(d)


def test_workers_stopped_under_load(daemon):
    """SIGSTOPped workers run out of wall time; the rest of the load is untouched."""
    d = daemon()
    stopped = []

    def fault():
        w = live_workers(d)
        # the first chance always stops one, so a short phase still has a fault
        if w and (not stopped or random.random() < 0.3):
            pid = random.choice(w)
            kill_quietly(pid, signal.SIGSTOP)
            stopped.append(pid)
    counts = run_load(Load(d.socket_path, connections=12, depth=2, timeout_ms=1000 * SCALE),
                      PHASE, fault, interval=0.1)
    assert stopped
    assert_clean(counts, allowed={"timeout", "crashed"})
    assert_serving(d)


def test_stopped_pool_workers_are_never_handed_a_job(daemon):
    d = daemon(daemon={"pool_size": 4})
    deadline = time.monotonic() + 5 * SCALE
    while len(live_workers(d)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    idle = live_workers(d)
    assert len(idle) == 4
    for pid in idle:
        kill_quietly(pid, signal.SIGSTOP)
    # stopped as the kernel sees it, before any job exists (a worker stopped
    # after its hand-over is a running execution, which its timeout covers)
    while [p for p, _, state, _ in d.workers() if p in idle and state != "T"]:
        time.sleep(0.01)
    counts = run_load(Load(d.socket_path, connections=4, depth=1, timeout_ms=3000 * SCALE),
                      PHASE / 2)
    assert_clean(counts), d.stderr[-3000:]
    for pid in idle:            # let them be reaped however the daemon disposed of them
        kill_quietly(pid, signal.SIGCONT)
    assert_serving(d)


def test_clients_disconnect_in_tool_calls(daemon):
    """Connections that vanish while their execution waits on a tool call cost
    their own executions only; every worker they had is gone afterwards."""
    d = daemon()
    dropped = [0]

    def fault():
        c = sbx.Client(d.socket_path)
        c.send_execute('return T.echo(1, 1)', tools=[{"name": "T", "functions": ["echo"]}],
                       handlers={"T.echo": lambda *a: sbx.NO_REPLY})
        try:
            c.wait_deferred(1, timeout=10 * SCALE)
        finally:
            c.close()
        dropped[0] += 1
    counts = run_load(Load(d.socket_path, connections=8, depth=2), PHASE, fault, interval=0.1)
    assert dropped[0] >= 3
    assert_clean(counts)
    assert_serving(d)


RATE = 2 << 20                  # the slow reader's bytes per second


def test_slow_reader_gets_everything(daemon):
    """A peer that reads slowly but steadily is never cut off, and large
    answers reach it whole while the other connections run as usual."""
    d = daemon(defaults={"max_output_bytes": 4 << 20})
    code = 'for i = 1, 512 do print(string.rep("\\1", 1023)) end return "done"'
    got = []

    def slow():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(d.socket_path)
        for i in range(2):
            s.sendall(b'{"jsonrpc":"2.0","id":%d,"method":"execute","params":{"code":%s}}\n'
                      % (i, sbx.json.dumps(code).encode()))
        buf = b""
        t0 = time.monotonic()
        deadline = t0 + 60 * SCALE
        while buf.count(b"\n") < 2 and time.monotonic() < deadline:
            s.settimeout(30 * SCALE)
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            ahead = len(buf) / RATE - (time.monotonic() - t0)
            if ahead > 0:           # read at RATE bytes/s, no faster
                time.sleep(ahead)
        s.close()
        got.append(time.monotonic() < deadline)
        for line in buf.splitlines():
            got.append(sbx.json.loads(line))

    import threading
    t = threading.Thread(target=slow)
    t.start()
    counts = run_load(Load(d.socket_path, connections=8, depth=2), PHASE)
    t.join(90 * SCALE)
    assert_clean(counts)
    assert got[0], "the slow reader did not get both answers within its deadline"
    got = got[1:]
    assert len(got) == 2, d.stderr[-2000:]
    for m in got:
        assert m["result"]["value"] == "done"
        assert m["result"]["output"] == ("\1" * 1023 + "\n") * 512
    assert_serving(d)


def test_fd_exhaustion_under_load(daemon):
    """Out of descriptors: executions that cannot get a worker are answered
    with a documented kind (never cancelled, never silence), the zygote does
    not storm, and service comes back once descriptors are free again."""
    d = daemon(daemon={"pool_size": 0})
    before = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (24, before[1]))
    try:
        counts = run_load(Load(d.socket_path, connections=12, depth=2, calls=(0, 1)),
                          PHASE / 2)
    finally:
        resource.prlimit(d.pid, resource.RLIMIT_NOFILE, before)
    assert_clean(counts, allowed={"internal_error", "busy"})
    storm = d.stderr.count("could not start a worker")
    assert storm < 500, "%d spawn failures logged in %.0f s" % (storm, PHASE / 2)
    counts = run_load(Load(d.socket_path, connections=4, depth=2), PHASE / 2)
    assert_clean(counts)
    assert_serving(d)


def test_reload_under_load(daemon):
    d = daemon()
    counts = run_load(Load(d.socket_path, connections=12, depth=2), PHASE,
                      lambda: d.signal(signal.SIGHUP), interval=0.1)
    assert_clean(counts)
    d.wait_log("reload")
    assert_serving(d)


def test_sigterm_under_load_answers_everything(daemon):
    """SIGTERM: every execution in flight is answered (finished, or
    cancelled) before its connection closes, and the daemon exits 0 with no
    process left."""
    d = daemon()
    load = Load(d.socket_path, connections=12, depth=2, tool_delay=0.02, settle=30 * SCALE)

    # One execution waits on a tool call across the SIGTERM; a new execute
    # arrives during the grace period; then the tool answers.
    held = d.client()
    held_id = held.send_execute('return T.echo(1, 1)', tools=[{"name": "T", "functions": ["echo"]}],
                                handlers={"T.echo": lambda *a: sbx.NO_REPLY})
    held.wait_deferred(1)

    async def main():
        task = asyncio.create_task(load.run(3600))
        await asyncio.sleep(PHASE / 2)
        load.depth = 0                      # stop sending; keep serving tool calls
        await asyncio.sleep(0.01)
        d.signal(signal.SIGTERM)
        await asyncio.sleep(0.05)
        late = held.send_execute("return 1")
        held.reply(held.deferred[0], "1:1")
        r = held.wait(late, timeout=10 * SCALE)
        assert not r.ok, r                  # no new work once stopping
        r = held.wait(held_id, timeout=10 * SCALE)
        assert r.ok or r.kind == "cancelled", r
        await asyncio.get_running_loop().run_in_executor(None, d.proc.wait, 30 * SCALE)
        load.stop.set()
        return await task
    counts = asyncio.run(main())
    assert d.proc.returncode == 0, d.stderr[-3000:]
    assert counts.errors["disconnected"] == 0, counts
    assert_clean(counts, allowed={"cancelled"})
    assert not os.path.exists(d.socket_path)
    assert not [c for c in d.children() if c[2] != "Z"]


PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def subreaper():
    """Make this test process the reaper of orphans, so a worker or zygote
    that outlives its supervisor becomes our child and can be found."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def orphans():
    """Our live children that are sandboxd's (reparented to us)."""
    from conftest import children_of
    return [c for c in children_of(os.getpid())
            if c[1].startswith("sandboxd-") and c[2] != "Z"]


def reap_all():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "nobody"])
def test_supervisor_killed_leaves_nothing(daemon, subreaper, as_root):
    if os.getuid() != 0:
        pytest.skip("needs root to start the daemon as root and as nobody")
    if as_root:
        d = daemon()
    else:
        d = Daemon(config=merge_config(**CONFIG), run_as=(65534, 65534))
        d.start()
    try:
        busy = d.client()
        busy.send_execute("while true do end", timeout_ms=100000 * SCALE)
        d.wait_for_workers(1)

        async def main():
            task = asyncio.create_task(Load(d.socket_path, connections=8, depth=2).run(3600))
            await asyncio.sleep(PHASE / 4)
            os.kill(d.pid, signal.SIGKILL)
            await asyncio.sleep(0.2)
            task.get_loop()
            return task
        asyncio.run(asyncio.wait_for(_cancel_after(main), 60))
        d.proc.wait()
        deadline = time.monotonic() + 3 * SCALE
        while orphans() and time.monotonic() < deadline:
            reap_all()
            time.sleep(0.05)
        left = orphans()
        for pid, *_ in left:
            kill_quietly(pid, signal.SIGKILL)
        reap_all()
        assert not left, "processes outlived the supervisor: %r" % left
    finally:
        if not as_root:
            d.cleanup()


async def _cancel_after(main):
    task = await main()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
