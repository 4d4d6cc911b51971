"""Fixtures for the Python client's tests: the real daemon on a temporary socket.

  SANDBOXD_BIN       the daemon binary (default: build/sandboxd of this tree)
  SANDBOXD_SANITIZE  "1" for the ASan+UBSan build: timeouts scaled x3

Fixtures:
  daemon          module-scoped daemon with CONFIG
  daemon_factory  function-scoped: daemon_factory(daemon={...}, defaults={...},
                  ceilings={...}) starts one with those values over CONFIG
  sock            the module daemon's socket path
"""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)
sys.path.append(os.path.join(REPO, "tests"))

import launch  # noqa: E402  (tests/launch.py: how every suite starts a daemon)

SANDBOXD_BIN = launch.SANDBOXD_BIN
SCALE = launch.SCALE

CONFIG = {
    "daemon": {"max_workers": 8, "max_queue": 64, "pool_size": 2,
               "max_message_bytes": 1048576, "log_level": "warning"},
    "defaults": {"timeout_ms": 10000 * SCALE},
    "ceilings": {"timeout_ms": 60000 * SCALE},
}


class Daemon(launch.Daemon):
    """One sandboxd on a private socket (tests/launch.py); start() again
    after kill() restarts it on the same socket."""

    def __init__(self, cfg):
        super().__init__(cfg, binary=SANDBOXD_BIN, prefix="sbxpy-")

    def start(self, timeout=60.0 * SCALE):
        try:
            return super().start(timeout)
        except launch.StartError as e:
            err = str(e)
        pytest.fail(err)

    @property
    def log(self):
        return self.stderr[-4000:]


def make_config(**sections):
    return launch.merge(CONFIG, **sections)


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
