"""Fixtures for the Python client's tests: the real daemon on a temporary socket.

  SANDBOXD_BIN       the daemon binary (default: build/sandboxd of this tree)
  SANDBOXD_SANITIZE  "1" for the ASan+UBSan build: timeouts scaled x3

Fixtures:
  daemon          module-scoped daemon with CONFIG
  daemon_factory  function-scoped: daemon_factory(daemon={...}, defaults={...},
                  ceilings={...}) starts one with those values over CONFIG
  sock            the module daemon's socket path
"""

import copy
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)

SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd")
SCALE = 3 if os.environ.get("SANDBOXD_SANITIZE") == "1" else 1
SANITIZER = re.compile(r"ERROR: (Address|Leak)Sanitizer|\.(c|h):\d+:\d+: runtime error:")

CONFIG = {
    "daemon": {"max_workers": 8, "max_queue": 64, "pool_size": 2,
               "max_message_bytes": 1048576, "log_level": "warning"},
    "defaults": {"timeout_ms": 10000 * SCALE},
    "ceilings": {"timeout_ms": 60000 * SCALE},
}


def render_config(cfg):
    out = []
    for section, kv in cfg.items():
        out.append("[%s]" % section)
        out.extend("%s = %s" % item for item in kv.items())
        out.append("")
    return "\n".join(out)


class Daemon:
    """One sandboxd on a private socket; start() again after kill() restarts it
    on the same socket."""

    def __init__(self, cfg):
        self.tmpdir = tempfile.mkdtemp(prefix="sbxpy-", dir="/tmp")
        self.socket_path = os.path.join(self.tmpdir, "s.sock")
        self.config_path = os.path.join(self.tmpdir, "sandboxd.conf")
        self.log_path = os.path.join(self.tmpdir, "stderr.log")
        with open(self.config_path, "w") as f:
            f.write(render_config(cfg))
        self.proc = None

    def start(self, timeout=10.0 * SCALE):
        if not os.path.exists(SANDBOXD_BIN):
            pytest.fail("daemon binary %s does not exist (run make)" % SANDBOXD_BIN)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [SANDBOXD_BIN, "-c", self.config_path, "-s", self.socket_path],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail("sandboxd exited with %d at start-up:\n%s"
                            % (self.proc.returncode, self.log))
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.socket_path)
                return self
            except OSError:
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("sandboxd did not start:\n%s" % self.log)
            time.sleep(0.02)

    @property
    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except FileNotFoundError:
            return ""

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def stop(self):
        """SIGTERM; the daemon must exit 0."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15 * SCALE)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("sandboxd ignored SIGTERM:\n%s" % self.log)

    def check_sanitizers(self):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return
        m = SANITIZER.search(text)
        assert not m, ("sanitizer report in sandboxd's log:\n"
                       + text[max(0, m.start() - 200):][:4000])

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def make_config(**sections):
    cfg = copy.deepcopy(CONFIG)
    for section, kv in sections.items():
        cfg.setdefault(section, {}).update(kv)
    return cfg


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(make_config())
    try:
        d.start()
        yield d
        alive = d.proc.poll() is None
        rc = d.stop()
        assert alive and rc == 0, "sandboxd died or failed to stop (%r):\n%s" % (rc, d.log)
        d.check_sanitizers()
    finally:
        d.cleanup()


@pytest.fixture
def sock(daemon):
    return daemon.socket_path


@pytest.fixture
def daemon_factory():
    made = []

    def make(start=True, **sections):
        d = Daemon(make_config(**sections))
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        try:
            d.stop()
            d.check_sanitizers()
        finally:
            d.cleanup()


@pytest.fixture(scope="session")
def scale():
    return SCALE
