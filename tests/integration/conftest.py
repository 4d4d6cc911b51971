"""Fixtures for the sandboxd integration tests.

Environment (set by the Makefile's test-integration target):
  SANDBOXD_BIN       absolute path of the daemon binary (default: build/sandboxd)
  SANDBOXCTL_BIN     absolute path of the CLI (default: build/sandboxctl)
  SANDBOXD_SANITIZE  "1" for the ASan+UBSan build: every timeout is scaled x3

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

A daemon started as another user (run_as) runs a copy of SANDBOXD_BIN in a
directory every user can reach (runnable_copy), so the suites pass from a
checkout that user cannot enter (a clone under /root).
"""

import atexit
import copy
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import sbx

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd")
SANDBOXCTL_BIN = os.environ.get("SANDBOXCTL_BIN") or os.path.join(REPO, "build", "sandboxctl")
SCALE = sbx.SCALE

# Children start with the default action for SIGINT and SIGHUP even when the
# suite itself runs with them ignored (nohup, a background job, a CI runner):
# the daemon keeps a signal ignored at start, and tests send both.  A no-op
# handler keeps them ignored for this process; exec resets a handled signal.
for _sig in (signal.SIGINT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, lambda *_: None)

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

SANITIZER_PATTERNS = [
    re.compile(r"ERROR: AddressSanitizer"),
    re.compile(r"ERROR: LeakSanitizer"),
    re.compile(r"\.(c|h):\d+:\d+: runtime error:"),   # UBSan
]


_RUNNABLE_DIR = []


def runnable_copy(path):
    """A copy of the executable `path` that any user can run: in a directory
    of its own under /tmp (0755, removed when the session ends).  A daemon
    started as another user (nobody) may not be able to reach the checkout at
    all (a clone under /root is 0700); the copy is the same bytes, so the test
    runs the very binary under test."""
    if not _RUNNABLE_DIR:
        d = tempfile.mkdtemp(prefix="sbxd-bin-", dir="/tmp")
        os.chmod(d, 0o755)
        atexit.register(shutil.rmtree, d, True)
        _RUNNABLE_DIR.append(d)
    dest = os.path.join(_RUNNABLE_DIR[0], os.path.basename(path))
    if not os.path.exists(dest) or os.path.getmtime(dest) < os.path.getmtime(path):
        shutil.copy2(path, dest + ".tmp")
        os.chmod(dest + ".tmp", 0o755)
        os.replace(dest + ".tmp", dest)
    return dest


def render_config(cfg):
    out = []
    for section, values in cfg.items():
        out.append("[%s]" % section)
        for k, v in values.items():
            out.append("%s = %s" % (k, v))
        out.append("")
    return "\n".join(out)


def merge_config(**sections):
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    for section, values in sections.items():
        cfg.setdefault(section, {}).update(values or {})
    return cfg


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


class Daemon:
    """One sandboxd process on a private socket."""

    def __init__(self, config=None, config_text=None, extra_args=(), check_stop=True,
                 run_as=None, rlimits=None, cpus=None):
        self.tmpdir = tempfile.mkdtemp(prefix="sbxd-", dir="/tmp")
        self.run_as = run_as        # (uid, gid): start the daemon under them (needs root)
        self.rlimits = rlimits or {}    # {resource.RLIMIT_X: (soft, hard)} for the daemon
        self.cpus = cpus                # CPUs the daemon (and so its workers) may run on
        if run_as:
            os.chown(self.tmpdir, run_as[0], run_as[1])
            os.chmod(self.tmpdir, 0o755)
        self.socket_path = os.path.join(self.tmpdir, "s.sock")
        self.config_path = os.path.join(self.tmpdir, "sandboxd.conf")
        self.stderr_path = os.path.join(self.tmpdir, "stderr.log")
        self.config = config if config is not None else merge_config()
        self.config_text = config_text if config_text is not None else render_config(self.config)
        self.extra_args = list(extra_args)
        self.check_stop = check_stop
        self.proc = None
        self.returncode = None
        self._clients = []

    # ------------------------------------------------------------ lifecycle
    def start(self, ready_timeout=10.0 * SCALE):
        if not os.path.exists(SANDBOXD_BIN):
            pytest.fail("daemon binary %s does not exist (run make)" % SANDBOXD_BIN)
        with open(self.config_path, "w") as f:
            f.write(self.config_text)
        self._err = open(self.stderr_path, "wb")
        ids, binary = {}, SANDBOXD_BIN
        if self.run_as:
            ids = dict(user=self.run_as[0], group=self.run_as[1], extra_groups=[])
            binary = runnable_copy(SANDBOXD_BIN)
        self.proc = subprocess.Popen(
            [binary, "-c", self.config_path, "-s", self.socket_path] + self.extra_args,
            stdin=subprocess.DEVNULL, stdout=self._err, stderr=self._err,
            start_new_session=True, preexec_fn=self._set_rlimits if self.rlimits or self.cpus else None,
            **ids)
        deadline = time.monotonic() + ready_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                pytest.fail("sandboxd exited with %d at start-up; stderr:\n%s" % (rc, self.stderr))
            if os.path.exists(self.socket_path):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.socket_path)
                    s.close()
                    return self
                except OSError:
                    s.close()
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("sandboxd did not accept on %s within %.0fs; stderr:\n%s" %
                            (self.socket_path, ready_timeout, self.stderr))
            time.sleep(0.02)

    def _set_rlimits(self):
        import resource
        for res, lim in self.rlimits.items():
            resource.setrlimit(res, lim)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, pattern, timeout=5.0 * SCALE):
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

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def client(self, **kw):
        c = sbx.Client(self.socket_path, **kw)
        self._clients.append(c)
        return c

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def write_config(self, cfg=None, text=None):
        self.config = cfg if cfg is not None else self.config
        self.config_text = text if text is not None else render_config(self.config)
        with open(self.config_path, "w") as f:
            f.write(self.config_text)

    def stop(self, timeout=15.0 * SCALE):
        """SIGTERM; wait; return the exit status."""
        for c in self._clients:
            c.close()
        self._clients = []
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("sandboxd did not exit within %.0fs of SIGTERM; stderr:\n%s"
                                     % (timeout, self.stderr[-4000:]))
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()

    def cleanup(self):
        self.kill()
        try:
            self._err.close()
        except Exception:
            pass
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def check_sanitizers(self):
        text = self.stderr
        for pat in SANITIZER_PATTERNS:
            m = pat.search(text)
            if m:
                start = max(0, m.start() - 200)
                raise AssertionError("sanitizer report in sandboxd stderr:\n%s" %
                                     text[start:start + 4000])

    def stop_and_check(self):
        """The teardown check: exit status 0, socket removed, no sanitizer report."""
        try:
            rc = self.stop()
            assert rc == 0, "sandboxd exited with %r after SIGTERM; stderr:\n%s" % (
                rc, self.stderr[-4000:])
            assert not os.path.exists(self.socket_path), \
                "sandboxd left its socket file behind after SIGTERM"
            self.check_sanitizers()
        finally:
            self.cleanup()

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

    def wait_for_workers(self, n=1, timeout=5.0 * SCALE):
        """Wait until at least n workers exist; return their pids."""
        deadline = time.monotonic() + timeout
        while True:
            w = [c for c in self.workers() if c[2] != "Z"]
            if len(w) >= n:
                return [c[0] for c in w]
            if time.monotonic() > deadline:
                raise AssertionError("expected %d worker(s), have %r" % (n, self.children()))
            time.sleep(0.02)

    def assert_no_leftovers(self, timeout=2.0 * SCALE, allowed_idle=0):
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
             rlimits=None, cpus=None, **sections):
        d = Daemon(config=merge_config(**sections), config_text=config_text,
                   extra_args=extra_args, check_stop=check_stop, run_as=run_as, rlimits=rlimits,
                   cpus=cpus)
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
