#!/usr/bin/python3
"""launch.py - the one way a test starts a real sandboxd (docs/hacking.md,
"Starting a daemon in a test").  Standard library only.

The rules, for every suite:
  * each daemon gets a directory of its own under /tmp with its config,
    rendered from {section: {key: value}} (or given as text), its stderr log
    and, unless the caller names another, its socket;
  * it is ready when it says so: READY=1 on a NOTIFY_SOCKET the launcher
    binds for the start (the sd_notify protocol, as scripts/run waits for
    it), never when a probe connection happens to get in.  The listener is
    closed once READY=1 came, so later notifications (a reload's) go nowhere.
    When the environment already names a NOTIFY_SOCKET (a test of the
    notification protocol listens there itself) the launcher leaves it to
    its owner and waits for the socket to accept a connection instead;
  * it runs in a session of its own, with SIGINT and SIGHUP at their
    default actions even when the suite runs with them ignored;
  * it dies with the suite: a daemon started from the main thread gets
    SIGKILL from the kernel when the process that started it ends, however
    it ends (PR_SET_PDEATHSIG; the daemon's zygote and workers die with it
    in turn), so a suite killed by SIGKILL or SIGTERM leaves no daemon.  The
    kernel ties that signal to the starting *thread*, so a daemon started
    from another thread (which may end before the test does) goes without;
    the signal survives exec and is set after the switch to run_as's ids
    (which would clear it);
  * it stops by SIGTERM: the stop is clean when it exits 0 within the
    timeout, its socket file is gone and its stderr holds no sanitizer
    report (AddressSanitizer, LeakSanitizer, UBSan's runtime errors).

Environment: SANDBOXD_BIN, the daemon (default build/sandboxd of this
checkout); SANDBOXD_SANITIZE=1, the ASan+UBSan build: SCALE = 3 stretches
every timeout.

As a module (the Python suites):
    d = launch.Daemon({"daemon": {"max_workers": 2}}).start()
    ... connect to d.socket_path ...
    d.stop_and_check()              # SIGTERM, the clean-stop checks, cleanup

As a program (the Node and Elixir suites):
    tests/launch.py [--set SECTION.KEY=VALUE]... [--socket PATH] [--log PATH]
Prints `ready SOCKET` once the daemon is ready (or `failed MESSAGE` and exits
2), then reads commands, one a line, on stdin:
    kill    SIGKILL the daemon (its socket file stays); answers `killed`
    start   start it again, same config and socket; answers `ready SOCKET`
    stop    (or the end of stdin, or SIGTERM, SIGINT, SIGHUP) stop it by
            SIGTERM; prints `exited STATUS` (negative: the signal that ended
            it), then `report LINE` for each line of a sanitizer report in
            its log, removes its directory and exits 1 when there was a
            report, else 0.
"""

import argparse
import atexit
import copy
import ctypes
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd")
SCALE = 3 if os.environ.get("SANDBOXD_SANITIZE") == "1" else 1
SANITIZER = re.compile(r"ERROR: (Address|Leak)Sanitizer|\.(c|h):\d+:\d+: runtime error:")

# Children start with the default action for SIGINT and SIGHUP even when the
# suite itself runs with them ignored (nohup, a background job, a CI runner):
# the daemon keeps a signal ignored at start, and tests send both.  A no-op
# handler keeps them ignored for this process; exec resets a handled signal.
for _sig in (signal.SIGINT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, lambda *_: None)


_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with(parent):
    """In the child before exec: SIGKILL when `parent`'s starting thread
    ends; if the parent is already gone, now."""
    if _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


class StartError(AssertionError):
    """The daemon exited at start-up, or did not say READY=1 in time."""


def render_config(cfg):
    """{section: {key: value}} as sandboxd.conf text."""
    out = []
    for section, values in cfg.items():
        out.append("[%s]" % section)
        out.extend("%s = %s" % kv for kv in values.items())
        out.append("")
    return "\n".join(out)


def merge(base, **sections):
    """A copy of the config `base` with the keys of each section replaced."""
    cfg = copy.deepcopy(base)
    for section, values in sections.items():
        cfg.setdefault(section, {}).update(values or {})
    return cfg


_RUNNABLE_DIR = []


def runnable_copy(path):
    """A copy of the executable `path` that any user can run: in a directory
    of its own under /tmp (0755, removed when this process ends).  A daemon
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


class _Ready:
    """The NOTIFY_SOCKET of one start: a datagram socket in the daemon's
    directory that every user may send to (a daemon started as nobody)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)

    def wait(self, timeout):
        """True once READY=1 has come, False when `timeout` passed first."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return False
            if "READY=1" in self.sock.recv(4096).decode("utf-8", "replace").split("\n"):
                return True

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def accepts(path):
    """Whether the daemon listens on path: the file appears at bind(2), and
    the daemon sets its mode and group before listen(2), so a connection
    before then is refused."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """One sandboxd on a private socket; start() again after kill() restarts
    it with the same config on the same socket.

    config       {section: {key: value}}, or config_text: the file as text
    binary       the daemon (default SANDBOXD_BIN)
    socket_path  where it listens (default: s.sock in its directory)
    stderr_path  its stdout and stderr, appended to (default: stderr.log there)
    extra_args   more command-line arguments
    env          variables added to its environment
    run_as       (uid, gid): start it under them (needs root); it then runs a
                 copy of the binary any user can reach (runnable_copy)
    rlimits      {resource.RLIMIT_X: (soft, hard)} set before it starts
    cpus         the CPUs it (and so its workers) may run on
    """

    def __init__(self, config=None, config_text=None, *, binary=None, socket_path=None,
                 stderr_path=None, extra_args=(), env=None, run_as=None, rlimits=None,
                 cpus=None, nice=0, prefix="sbxd-"):
        self.tmpdir = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.run_as = run_as
        if run_as:
            os.chown(self.tmpdir, run_as[0], run_as[1])
            os.chmod(self.tmpdir, 0o755)
        self.binary = binary or SANDBOXD_BIN
        self.socket_path = socket_path or os.path.join(self.tmpdir, "s.sock")
        self.config_path = os.path.join(self.tmpdir, "sandboxd.conf")
        self.stderr_path = stderr_path or os.path.join(self.tmpdir, "stderr.log")
        self.config = config if config is not None else {}
        self.config_text = config_text if config_text is not None else render_config(self.config)
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.rlimits = rlimits or {}
        self.cpus = cpus
        self.nice = nice            # added to the daemon's nice value at its start
        self.proc = None
        self.returncode = None

    # ------------------------------------------------------------ lifecycle
    def start(self, ready_timeout=60.0 * SCALE):
        """Start the daemon and return once it is ready; StartError when it
        exits first or is not ready within ready_timeout seconds (then it
        is killed)."""
        if not os.path.exists(self.binary):
            raise StartError("daemon binary %s does not exist (run make)" % self.binary)
        with open(self.config_path, "w") as f:
            f.write(self.config_text)
        env = dict(os.environ, **self.env)
        ready = None
        if "NOTIFY_SOCKET" not in env:
            ready = _Ready(self.tmpdir)
            env["NOTIFY_SOCKET"] = ready.path
        ids, binary = {}, self.binary
        if self.run_as:
            ids = dict(user=self.run_as[0], group=self.run_as[1], extra_groups=[])
            binary = runnable_copy(self.binary)
        try:
            main = threading.current_thread() is threading.main_thread()
            parent = os.getpid()

            def preexec():
                if main:
                    _die_with(parent)
                self._limit()
            with open(self.stderr_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [binary, "-c", self.config_path, "-s", self.socket_path] + self.extra_args,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                    start_new_session=True,
                    preexec_fn=preexec if main or self.rlimits or self.cpus or self.nice else None,
                    **ids)
            self.returncode = None
            self._wait_ready(ready, ready_timeout)
        finally:
            if ready is not None:
                ready.close()
        return self

    def _wait_ready(self, ready, timeout):
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                raise StartError("sandboxd exited with %d at start-up; stderr:\n%s"
                                 % (rc, self.stderr[-4000:]))
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise StartError("sandboxd was not ready on %s within %.0fs; stderr:\n%s"
                                 % (self.socket_path, timeout, self.stderr[-4000:]))
            if ready is not None:
                if ready.wait(min(left, 0.05)):
                    return
            elif os.path.exists(self.socket_path) and accepts(self.socket_path):
                return
            else:
                time.sleep(0.02)

    def _limit(self):
        if not (self.rlimits or self.cpus or self.nice):
            return
        for res, lim in self.rlimits.items():
            resource.setrlimit(res, lim)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
        if self.nice:
            os.nice(self.nice)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def stderr(self):
        """Everything the daemon wrote to its stderr so far."""
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def write_config(self, cfg=None, text=None):
        """Rewrite the config file (for a reload by SIGHUP, or the next start)."""
        self.config = cfg if cfg is not None else self.config
        self.config_text = text if text is not None else render_config(self.config)
        with open(self.config_path, "w") as f:
            f.write(self.config_text)

    def stop(self, timeout=15.0 * SCALE):
        """SIGTERM, then wait; return the exit status (None: never started).
        A daemon that outlives the timeout is killed, and AssertionError
        raised."""
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
        """SIGKILL the daemon's process group; its socket file stays."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()

    def sanitizer_report(self):
        """The sanitizer report in the daemon's stderr (from 200 characters
        before it, at most 4000), or None."""
        text = self.stderr
        m = SANITIZER.search(text)
        if m is None:
            return None
        start = max(0, m.start() - 200)
        return text[start:start + 4000]

    def check_sanitizers(self):
        report = self.sanitizer_report()
        if report is not None:
            raise AssertionError("sanitizer report in sandboxd stderr:\n%s" % report)

    def stop_and_check(self):
        """The clean stop: exit status 0, socket removed, no sanitizer report;
        the directory is removed in any case."""
        try:
            rc = self.stop()
            assert rc == 0, "sandboxd exited with %r after SIGTERM; stderr:\n%s" % (
                rc, self.stderr[-4000:])
            assert not os.path.exists(self.socket_path), \
                "sandboxd left its socket file behind after SIGTERM"
            self.check_sanitizers()
        finally:
            self.cleanup()

    def cleanup(self):
        """Kill it if it still runs and remove its directory."""
        self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


# ------------------------------------------------------------------ the program

class _Stop(Exception):
    pass


def _stop_signal(signum, frame):
    raise _Stop()


def _say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _started(d):
    """Start d and say `ready SOCKET`; or say `failed MESSAGE` (the whole
    message on stderr) and return False."""
    try:
        d.start()
    except StartError as e:
        _say("failed " + str(e).split("\n", 1)[0])
        sys.stderr.write(str(e) + "\n")
        return False
    _say("ready " + d.socket_path)
    return True


def _setting(text):
    key, sep, value = text.partition("=")
    section, dot, name = key.partition(".")
    if not sep or not dot or not section or not name:
        raise argparse.ArgumentTypeError("expected SECTION.KEY=VALUE, got %r" % text)
    return section, name, value


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Start sandboxd for a test; see the top of this file for the protocol.")
    ap.add_argument("--set", dest="settings", action="append", type=_setting, default=[],
                    metavar="SECTION.KEY=VALUE", help="a config value (repeatable)")
    ap.add_argument("--socket", help="where the daemon listens (default: in its directory)")
    ap.add_argument("--log", help="its stderr log (default: in its directory)")
    ap.add_argument("--bin", help="the daemon (default: $SANDBOXD_BIN, else build/sandboxd)")
    args = ap.parse_args(argv)
    cfg = {}
    for section, key, value in args.settings:
        cfg.setdefault(section, {})[key] = value
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop_signal)
    d = Daemon(cfg, binary=args.bin, socket_path=args.socket, stderr_path=args.log)
    try:
        cmd = "start"
        while cmd != "stop":
            if cmd == "start":
                if not _started(d):
                    return 2
            elif cmd == "kill":
                d.kill()
                _say("killed")
            elif cmd:
                sys.stderr.write("launch.py: unknown command %r\n" % cmd)
            line = sys.stdin.readline()
            cmd = line.strip() if line else "stop"
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)    # the stop itself runs to its end
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            rc = d.stop()
        except AssertionError as e:                 # it ignored SIGTERM: killed
            sys.stderr.write(str(e) + "\n")
            rc = d.proc.returncode
        report = d.sanitizer_report()
        d.cleanup()
    if rc is not None:
        _say("exited %d" % rc)
    for line in report.rstrip("\n").split("\n") if report else ():
        _say("report " + line)
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
