"""The hand-over: a pooled worker that does not take its job (frozen by a
cgroup freezer, stopped after the pool's liveness check, killed before it
read the job) loses it to another worker, well before the execution's
timeout; the client sees a normal answer, the log and `metrics` say so, and
nothing is left running (daemon/exec.h, "the hand-over").  And the
neighbours that must not count as stuck: a chunk that computes, one that
waits for a slow tool, a burst of executions on a loaded machine.

A stop the pool's check cannot see is made with a cgroup freezer: a frozen
task is not 'T' in /proc/PID/stat ('S' under cgroup v2, 'D' under v1), and
its parent gets no stop report.  The tests that need one skip where no
freezer hierarchy is writable (not root, a read-only /sys/fs/cgroup).
"""

import ctypes
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

import sbx
from conftest import read_proc_stat, wait_in_read
from test_metrics import scrape, value

SCALE = sbx.SCALE
# Long enough that an execution answered at all before it did not wait for
# a stuck worker until its timeout (the bound is HANDOVER_LOOK + HANDOVER_GAP, 55 ms)
TIMEOUT_MS = 20000 * SCALE
T = [{"name": "T", "functions": ["slow"]}]


def mounts():
    with open("/proc/self/mounts") as f:
        return [line.split() for line in f]


class Freezer:
    """A cgroup of the test's own that it freezes and thaws: "v2" (a
    cgroup2 hierarchy's cgroup.freeze: frozen tasks sleep, SIGKILL ends
    them at once) or "v1" (the freezer controller's freezer.state: frozen
    tasks show 'D', and a SIGKILL takes effect at the thaw)."""

    def __init__(self, kind):
        self.kind = kind
        root = None
        for dev, mnt, fstype, opts, *_ in mounts():
            if kind == "v2" and fstype == "cgroup2":
                root = mnt
            elif kind == "v1" and fstype == "cgroup" and "freezer" in opts.split(","):
                root = mnt
            if root:
                break
        if root is None:
            pytest.skip("no cgroup %s freezer hierarchy mounted" % kind)
        self.root = root
        self.path = os.path.join(root, "sandboxd-test-%d-%d" % (os.getpid(), time.monotonic_ns()))
        try:
            os.mkdir(self.path)
        except OSError as e:
            pytest.skip("cannot make a cgroup in %s: %s" % (root, e))
        self.pids = []

    def _write(self, name, text):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def add(self, pid):
        try:
            self._write("cgroup.procs", "%d\n" % pid)
        except OSError as e:
            self.close()
            pytest.skip("cannot move a process into %s: %s" % (self.path, e))
        self.pids.append(pid)

    def frozen(self):
        if self.kind == "v2":
            with open(os.path.join(self.path, "cgroup.events")) as f:
                return "frozen 1\n" in f.read()
        with open(os.path.join(self.path, "freezer.state")) as f:
            return f.read().strip() == "FROZEN"

    def freeze(self):
        self._write("cgroup.freeze" if self.kind == "v2" else "freezer.state",
                    "1\n" if self.kind == "v2" else "FROZEN\n")
        deadline = time.monotonic() + sbx.SAFETY_NET
        while not self.frozen():
            assert time.monotonic() < deadline, "%s did not freeze" % self.path
            time.sleep(0.005)

    def thaw(self):
        self._write("cgroup.freeze" if self.kind == "v2" else "freezer.state",
                    "0\n" if self.kind == "v2" else "THAWED\n")

    def close(self):
        """Thaw, move what still lives back to the hierarchy's root, remove."""
        if not os.path.isdir(self.path):
            return
        self.thaw()
        with open(os.path.join(self.path, "cgroup.procs")) as f:
            left = [int(p) for p in f.read().split()]
        for p in left:
            try:
                with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                    f.write("%d\n" % p)
            except OSError:
                pass
        deadline = time.monotonic() + sbx.SAFETY_NET
        while True:
            try:
                os.rmdir(self.path)
                return
            except OSError:
                assert time.monotonic() < deadline, "cannot remove %s" % self.path
                time.sleep(0.02)


@pytest.fixture
def freezer_factory():
    made = []

    def make(kind="v2"):
        f = Freezer(kind)
        made.append(f)
        return f
    yield make
    for f in made:
        f.close()


def gone(pid):
    st = read_proc_stat(pid)
    return st is None or st[1] in ("Z", "X")


def wait_gone(pids, timeout=sbx.SAFETY_NET):
    deadline = time.monotonic() + timeout
    while not all(gone(p) for p in pids):
        assert time.monotonic() < deadline, [(p, read_proc_stat(p)) for p in pids]
        time.sleep(0.01)


def lost(c):
    """(stuck, died) of sandboxd_handovers_lost_total."""
    fams = scrape(c)
    return (value(fams, "sandboxd_handovers_lost_total", reason="stuck"),
            value(fams, "sandboxd_handovers_lost_total", reason="died"))


def pooled(d, n, old=()):
    """The n pooled workers (none of the pids in old), each set up and
    asleep in read(2) on its channel."""
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        pool = [p for p in d.wait_for_workers(n) if p not in old]
        if len(pool) >= n:
            break
        assert time.monotonic() < deadline, (pool, old)
        time.sleep(0.01)
    for p in pool:
        wait_in_read(p)
    return pool


# ------------------------------------------------------------------ a stuck worker

@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_frozen_pooled_worker_loses_its_job_to_another(daemon_factory, freezer_factory, kind):
    """The pooled worker is frozen: alive, not 'T', so the pool's check
    hands it the job.  It never reads it: it is killed and the job goes to
    a fresh worker, answered in a fraction of timeout_ms."""
    d = daemon_factory(daemon={"pool_size": 1})
    c = d.client()
    assert lost(c) == (0, 0)
    [w] = pooled(d, 1)
    fz = freezer_factory(kind)
    fz.add(w)
    fz.freeze()
    assert read_proc_stat(w)[1] not in ("T", "t"), read_proc_stat(w)
    t0 = time.monotonic()
    r = c.execute("return 6 * 7", timeout_ms=TIMEOUT_MS, timeout=2 * TIMEOUT_MS / 1000)
    took = time.monotonic() - t0
    assert r.ok and r.result["value"] == 42, r
    assert took < TIMEOUT_MS / 1000 / 4, took
    assert lost(c) == (1, 0)
    d.wait_log(r"exec seq=\d+: worker %d did not take its job; handing it to another worker" % w)
    if kind == "v1":
        # killed, but a v1-frozen task dies only when thawed
        assert read_proc_stat(w)[1] == "D", read_proc_stat(w)
        fz.thaw()
    wait_gone([w])
    assert c.value("return 'again'") == "again"
    d.assert_no_leftovers(allowed_idle=1)


def one_frozen_worker(daemon_factory, freezer_factory):
    """A daemon whose pool is one worker, frozen: (daemon, client, pid,
    freezer)."""
    d = daemon_factory(daemon={"pool_size": 1})
    c = d.client()
    [w] = pooled(d, 1)
    fz = freezer_factory()
    fz.add(w)
    fz.freeze()
    return d, c, w, fz


def test_frozen_worker_session_opens_on_another(daemon_factory, freezer_factory):
    """A session's open is a hand-over like an execute's: the session opens
    on another worker and its chunks run there."""
    d, c, w, fz = one_frozen_worker(daemon_factory, freezer_factory)
    r = c.call("session/open", {"timeout_ms": TIMEOUT_MS}, timeout=2 * TIMEOUT_MS / 1000)
    assert r.ok, r
    sid = r.result["session"]
    r = c.execute("x = 5 return x", session=sid)
    assert r.ok and r.result["value"] == 5, r
    assert c.value("return x + 1", session=sid) == 6
    assert lost(c) == (1, 0)
    wait_gone([w])
    assert c.call("session/close", {"session": sid}).ok


def test_every_worker_stuck_gives_up_after_three(daemon_factory, freezer_factory):
    """Every pooled worker frozen, and the zygote too, so no fresh worker
    comes: the job is handed to three workers, then answered internal_error
    naming the cause, long before its timeout; the three are killed and
    reaped, and with the zygote thawed the next execution runs."""
    d = daemon_factory(daemon={"pool_size": 3})
    c = d.client()
    pool = pooled(d, 3)
    fz = freezer_factory()
    zygotes = [z[0] for z in d.zygotes()]
    for p in pool + zygotes:
        fz.add(p)
    fz.freeze()
    t0 = time.monotonic()
    r = c.execute("return 1", timeout_ms=TIMEOUT_MS, timeout=2 * TIMEOUT_MS / 1000)
    took = time.monotonic() - t0
    assert r.kind == "internal_error", r
    assert r.data["reason"] == "no worker took the job", r
    assert "3 workers in a row" in r.message, r
    assert took < TIMEOUT_MS / 1000 / 4, took
    assert lost(c) == (3, 0)
    d.wait_log(r"worker (%s) did not take its job; 3 workers in a row did not, giving up"
               % "|".join(str(p) for p in pool))
    wait_gone(pool)
    fz.thaw()
    assert c.value("return 'thawed'", timeout_ms=TIMEOUT_MS) == "thawed"
    fz.close()
    d.assert_no_leftovers(allowed_idle=3)


# ------------------------------------------------------------ a worker dead before it read its job

libc = ctypes.CDLL(None, use_errno=True)
SYS_PIDFD_GETFD = 438


def queued_to(pid, fd=3):
    """Bytes waiting unread in pid's fd (its channel): read through a copy
    of the descriptor (pidfd_getfd), closed again at once, so that the
    worker's exit still closes the socket."""
    pidfd = os.pidfd_open(pid)
    try:
        mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if mine < 0:
            pytest.skip("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
        try:
            return struct.unpack("i", fcntl.ioctl(mine, termios.FIONREAD, b"\0" * 4))[0]
        finally:
            os.close(mine)
    finally:
        os.close(pidfd)


def wait_state(pid, states, timeout=sbx.SAFETY_NET):
    deadline = time.monotonic() + timeout
    while (read_proc_stat(pid) or ("", "X"))[1] not in states:
        assert time.monotonic() < deadline, read_proc_stat(pid)
        time.sleep(0.001)


def test_worker_killed_before_it_read_its_job(daemon_factory, freezer_factory):
    """The job is in the worker's socket, unread, when the worker dies
    (SIGKILL): nothing of it ran, so it goes to another worker and the
    client gets its value, not `crashed`.  To order it, the worker is
    frozen when handed the job, and the supervisor is stopped while the
    test kills the worker, so it learns of the death before any look."""
    d, c, w, fz = one_frozen_worker(daemon_factory, freezer_factory)
    i = c.send_execute("return 'taken by another'", timeout_ms=TIMEOUT_MS)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while queued_to(w) == 0:
        assert time.monotonic() < deadline, "the job never reached worker %d" % w
    seen = time.monotonic()
    os.kill(d.pid, signal.SIGSTOP)
    late = time.monotonic() - seen          # looks at 5, then 55 ms find a stuck worker
    try:
        wait_state(d.pid, ("T", "t"))
        os.kill(w, signal.SIGKILL)
        wait_state(w, ("Z",))
    finally:
        os.kill(d.pid, signal.SIGCONT)
    r = c.wait(i, 2 * TIMEOUT_MS / 1000)
    assert r.ok and r.result["value"] == "taken by another", r
    stuck, died = lost(c)
    if late < 0.005:
        assert (stuck, died) == (0, 1)
        d.wait_log(r"worker %d died before it took its job; handing it to another worker" % w)
    else:                                   # a loaded test machine: the looks may have won
        assert stuck + died == 1, (stuck, died)
    d.assert_no_leftovers(allowed_idle=1)


def test_pooled_workers_killed_just_before_execs_are_answered(daemon_factory):
    """SIGKILL to every pooled worker, then an execute at once: whether the
    supervisor reaps them first, finds them dead at the hand-over, or
    hands the job to one that is dying, the answer is the value."""
    d = daemon_factory(daemon={"pool_size": 2})
    c = d.client()
    killed = set()
    for n in range(10):
        pool = pooled(d, 2, killed)
        killed.update(pool)
        for p in pool:
            os.kill(p, signal.SIGKILL)
        r = c.execute("return %d" % n, timeout_ms=TIMEOUT_MS, timeout=2 * TIMEOUT_MS / 1000)
        assert r.ok and r.result["value"] == n, r
        wait_gone(pool)
        d.assert_no_leftovers(allowed_idle=2)   # the execution's worker gone too


# ------------------------------------------------------------------ the legitimate neighbours

BUSY_50MS = "local t = os.clock() while os.clock() - t < 0.05 do end return 'busy'"


def test_slow_chunks_are_not_stuck(daemon_factory):
    """A chunk that computes for 50 ms of CPU, and one whose tool answers
    after 200 ms, keep their worker: no hand-over is lost."""
    d = daemon_factory(daemon={"pool_size": 1})
    c = d.client()
    pooled(d, 1)
    assert c.value(BUSY_50MS) == "busy"

    def slow(args):
        time.sleep(0.2)
        return "late"
    r = c.execute("return T.slow()", tools=T, handlers={"T.slow": slow})
    assert r.ok and r.result["value"] == "late", r
    assert lost(c) == (0, 0)


class Hogs:
    """One CPU-bound process per CPU, at the test's priority, for a with block."""

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in os.sched_getaffinity(0)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("pool_size", [0, 4])
def test_burst_on_a_loaded_machine_loses_no_hand_over(daemon_factory, pool_size):
    """50 executions at once, on 5 connections, beside a CPU hog per CPU:
    pool_size 0 hands each job to a worker still in its set-up, 4 to warm
    ones.  Every one is answered with its value and no worker is taken for
    stuck: a worker that waits for a CPU is runnable, one in its set-up
    uses CPU."""
    d = daemon_factory(daemon={"pool_size": pool_size})
    clients = [d.client() for _ in range(5)]
    if pool_size:
        pooled(d, pool_size)
    codes = ["return %d" % n if n % 5 else BUSY_50MS for n in range(50)]
    with Hogs():
        ids = [(clients[n % 5], clients[n % 5].send_execute(code, timeout_ms=TIMEOUT_MS), code)
               for n, code in enumerate(codes)]
        for c, i, code in ids:
            r = c.wait(i, 2 * TIMEOUT_MS / 1000)
            assert r.ok, r
            assert r.result["value"] == ("busy" if code == BUSY_50MS else int(code.split()[1])), r
    assert lost(clients[0]) == (0, 0)
    assert "did not take its job" not in d.stderr
