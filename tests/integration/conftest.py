"""Fixtures for the sandboxd integration tests.

Environment (set by the Makefile's test-integration target):
  SANDBOXD_BIN       absolute path of the daemon binary (default: build/sandboxd)
  SANDBOXCTL_BIN     absolute path of the CLI (default: build/sandboxctl)
  SANDBOXD_SANITIZE  "1" for the ASan+UBSan build: every timeout is scaled x3
  SANDBOXD_SHARDS    [daemon] shards of every test daemon (default: the
                     daemon's, 1): `make test-integration SHARDS=2` runs the
                     suites with a zygote per CPU

Fixtures:
  daemon          module-scoped daemon with the default test config (DEFAULT_CONFIG)
  client          a fresh sbx.Client on `daemon`; after the test the daemon must
                  still be alive and answer ping on a new connection
  daemon_factory  function-scoped factory: daemon_factory(daemon={...},
                  defaults={...}, ceilings={...}) starts a daemon with those config
                  values over the defaults (stopped and checked at teardown);
                  rlimits={resource.RLIMIT_X: (soft, hard)} starts it under them;
                  cpus={0} starts it on those CPUs only (sched_setaffinity)
  sandboxd_bin, sandboxctl_bin, scale

Daemons are started by tests/launch.py, the launcher every suite shares
(docs/hacking.md, "Starting a daemon in a test"): a private directory and
config, ready on READY=1, a clean stop checked for sanitizer reports.  A
daemon started as another user (run_as) runs a copy of SANDBOXD_BIN in a
directory every user can reach (runnable_copy), so the suites pass from a
checkout that user cannot enter (a clone under /root).
"""

import os
import re
import signal
import sys
import time

import pytest

import sbx

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.append(os.path.dirname(HERE))

import launch  # noqa: E402  (tests/launch.py: how every suite starts a daemon)

SANDBOXD_BIN = launch.SANDBOXD_BIN
SANDBOXCTL_BIN = os.environ.get("SANDBOXCTL_BIN") or os.path.join(REPO, "build", "sandboxctl")
SCALE = sbx.SCALE
render_config = launch.render_config
runnable_copy = launch.runnable_copy

# The test defaults.  Defaults and ceilings are all finite and pairwise
# different, so `describe` can be checked value by value.  pool_size = 0 so
# that, at rest, the daemon has no worker processes at all (leftover checks).
DEFAULT_CONFIG = {
    "daemon": {
        "max_workers": 8,
        "max_queue": 128,
        "pool_size": 0,
        "max_message_bytes": 1048576,
        "max_code_bytes": 65536,
        "log_level": "info",
    },
    "defaults": {
        "timeout_ms": 10000 * SCALE,
        "max_heap": 128000000,
        "max_reductions": 2000000000,
        "cpu_ms": 20000 * SCALE,
        "priority": "low",
        "max_output_bytes": 1048576,
        "max_bindings_bytes": 10000000,
    },
    "ceilings": {
        "timeout_ms": 120000 * SCALE,
        "max_heap": 512000000,
        "max_reductions": 4000000000,
        "cpu_ms": 60000 * SCALE,
        "priority": "normal",
        "max_output_bytes": 16777216,
        "max_bindings_bytes": 100000000,
    },
}


SHARDS = int(os.environ.get("SANDBOXD_SHARDS") or 0)
if SHARDS:
    DEFAULT_CONFIG["daemon"]["shards"] = SHARDS
# the zygotes a daemon with the test config runs
ZYGOTES = min(SHARDS, len(os.sched_getaffinity(0))) if SHARDS > 1 else 1


def merge_config(**sections):
    return launch.merge(DEFAULT_CONFIG, **sections)


def read_proc_stat(pid):
    """(comm, state, ppid) of pid, or None if it is gone."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    l, r = data.find("("), data.rfind(")")
    comm = data[l + 1:r]
    rest = data[r + 2:].split()
    return comm, rest[0], int(rest[1]), int(rest[11]) + int(rest[12])


def session_of(pid):
    """The session id of pid, or None if it is gone."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(data[data.rfind(")") + 2:].split()[3])


def children_of(ppid):
    """[(pid, comm, state, cpu_ticks)] of the live children of ppid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = read_proc_stat(name)
        if st and st[2] == ppid:
            out.append((int(name), st[0], st[1], st[3]))
    return out


def timed_out_past(client, code, calls=1, first_ms=300, **kw):
    """Execute `code` until it times out after making `calls` tool calls: with
    timeout_ms = first_ms, doubled while an execution timed out before those
    calls came.  A timeout test asserts on what the chunk did before its
    timeout (output printed, calls outstanding), and under load a worker can
    start, or get the CPU, later than any fixed timeout (the timeout bounds
    STARTING, then RUNNING afresh: docs/architecture.md); the calls show that
    the chunk got there, whatever the load.  Returns the timeout answer and
    its timeout_ms."""
    ms = first_ms
    while True:
        n = len(client.tool_calls)
        r = client.execute(code, timeout_ms=ms, **kw)
        assert r.kind == "timeout", r
        made = len(client.tool_calls) - n
        if made >= calls:
            return r, ms
        assert ms < 20000 * SCALE, \
            "%d of %d tool calls before a timeout of %d ms: %r" % (made, calls, ms, r)
        ms *= 2


def wait_in_read(pid, fd=3, timeout=5.0 * SCALE):
    """Wait until pid sleeps in read(2) on fd (a worker's channel is 3): a
    process blocked there uses no CPU until something is written to it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open("/proc/%d/syscall" % pid) as f:
                fields = f.read().split()
        except PermissionError:
            # a worker under another uid or in a user namespace of its own,
            # seen by a test that is not root: its syscall is not ours to read
            pytest.skip("cannot read /proc/%d/syscall (ptrace access: run as root)" % pid)
        except OSError:
            fields = []
        if len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == fd:
            return
        assert time.monotonic() < deadline, "%d not blocked in read(%d): %r" % (pid, fd, fields)
        time.sleep(0.01)


class Daemon(launch.Daemon):
    """One sandboxd process on a private socket, started by the launcher
    (tests/launch.py), with what the suite asks of it: sbx clients, its log,
    its processes."""

    def __init__(self, config=None, config_text=None, extra_args=(), check_stop=True,
                 run_as=None, rlimits=None, cpus=None, env=None, nice=0):
        super().__init__(config if config is not None else merge_config(), config_text,
                         binary=SANDBOXD_BIN, extra_args=extra_args, env=env, run_as=run_as,
                         rlimits=rlimits, cpus=cpus, nice=nice)
        self.check_stop = check_stop
        self._clients = []

    # ------------------------------------------------------------ lifecycle
    def start(self, ready_timeout=sbx.SAFETY_NET):
        """As the launcher's, a failure to start failing the test."""
        try:
            return super().start(ready_timeout)
        except launch.StartError as e:
            err = str(e)
        pytest.fail(err)

    def wait_log(self, pattern, timeout=sbx.SAFETY_NET):
        """Wait until a line matching `pattern` appears on stderr; return the match.
        A log line and a client-visible effect are not ordered for the test's
        reader (the log file is read separately), so assertions on the log wait."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.stderr)
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError("no log line /%s/ within %.0fs; stderr:\n%s"
                                     % (pattern, timeout, self.stderr[-3000:]))
            time.sleep(0.02)

    def client(self, **kw):
        c = sbx.Client(self.socket_path, **kw)
        self._clients.append(c)
        return c

    def stop(self, timeout=15.0 * SCALE):
        """As the launcher's, after closing this suite's clients."""
        for c in self._clients:
            c.close()
        self._clients = []
        return super().stop(timeout)

    # ------------------------------------------------------------ processes
    def children(self):
        return children_of(self.pid)

    def workers(self):
        return [c for c in self.children() if c[1] == "sandboxd-worker"]

    def worker_pids(self):
        return [c[0] for c in self.workers()]

    def zygotes(self):
        """The zygote: named so, and the leader of its own session (a worker
        it has just forked bears its name until the worker renames itself,
        but stays in the zygote's session)."""
        return [c for c in self.children() if c[1] == "sandboxd-zygote" and session_of(c[0]) == c[0]]

    def kill_zygotes(self):
        """SIGKILL every live zygote (one already gone is no error)."""
        for pid, _, state, _ in self.zygotes():
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def wait_for_workers(self, n=1, timeout=60.0 * SCALE):
        """Wait until at least n workers exist; return their pids.  The wait
        ends when they do; timeout is only a safety net against a hang (a
        loaded machine can take seconds to start one)."""
        deadline = time.monotonic() + timeout
        while True:
            w = [c for c in self.workers() if c[2] != "Z"]
            if len(w) >= n:
                return [c[0] for c in w]
            if time.monotonic() > deadline:
                raise AssertionError("expected %d worker(s), have %r" % (n, self.children()))
            time.sleep(0.02)

    def new_worker(self, before):
        """The pid of the one live worker that is not in `before` (a set of
        pids), waited for by its pid, not by a count: a worker in `before`
        may still be exiting from an earlier execution and leave while the
        new one arrives.  With pool_size 0 only the execution or session
        the test just started forks one."""
        deadline = time.monotonic() + sbx.SAFETY_NET
        while True:
            pids = {c[0] for c in self.workers() if c[2] != "Z"} - set(before)
            if pids:
                assert len(pids) == 1, self.children()
                return pids.pop()
            assert time.monotonic() < deadline, "no new worker: %r" % self.children()
            time.sleep(0.02)

    def assert_no_leftovers(self, timeout=30.0 * SCALE, allowed_idle=0):
        """Poll until no more than allowed_idle workers remain (pool_size) and no
        child is a zombie.  With allowed_idle > 0 the remaining workers must be
        idle: not accumulating CPU time."""
        deadline = time.monotonic() + timeout
        while True:
            kids = self.children()
            workers = [c for c in kids if c[1] == "sandboxd-worker"]
            zombies = [c for c in kids if c[2] == "Z"]
            if len(workers) <= allowed_idle and not zombies:
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    "leftover worker processes or zombies after %.1fs: %r" % (timeout, kids))
            time.sleep(0.02)
        if workers:
            before = {c[0]: c[3] for c in workers}
            time.sleep(0.3)
            after = {c[0]: c[3] for c in self.workers()}
            busy = [p for p in before if p in after and after[p] - before[p] > 5]
            assert not busy, "idle workers are burning CPU (a leftover execution?): %r" % busy

    def assert_alive(self):
        assert self.alive(), "sandboxd died (exit %r); stderr:\n%s" % (
            self.proc.poll(), self.stderr[-4000:])
        with sbx.Client(self.socket_path) as c:
            c.ping()


# -------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def sandboxd_bin():
    return SANDBOXD_BIN


@pytest.fixture(scope="session")
def sandboxctl_bin():
    return SANDBOXCTL_BIN


@pytest.fixture(scope="session")
def scale():
    return SCALE


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    try:
        d.start()
    except BaseException:
        d.cleanup()             # no daemon and no temporary directory left behind
        raise
    yield d
    d.stop_and_check()


@pytest.fixture
def client(daemon):
    c = daemon.client()
    yield c
    c.close()
    daemon.assert_alive()


@pytest.fixture
def daemon_factory():
    started = []

    def make(config_text=None, extra_args=(), check_stop=True, start=True, run_as=None,
             rlimits=None, cpus=None, nice=0, **sections):
        d = Daemon(config=merge_config(**sections), config_text=config_text,
                   extra_args=extra_args, check_stop=check_stop, run_as=run_as, rlimits=rlimits,
                   cpus=cpus, nice=nice)
        started.append(d)
        if start:
            d.start()
        return d

    yield make
    errors = []
    for d in started:
        if d.proc is None:
            d.cleanup()
            continue
        if not d.check_stop:
            d.stop()
            d.cleanup()
            continue
        try:
            d.stop_and_check()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n".join(errors))
