"""make test in a terminal: the pytest and ExUnit suites pass when their
output is a terminal (colour on, as a newcomer runs them), not only piped.
One small file of each, under a pseudo-terminal; the Node suites have the
same check in client/node/test/terminal.test.mjs."""
import os
import pty
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def in_a_terminal(argv, cwd, env):
    """Run argv with stdin, stdout and stderr on a new pseudo-terminal (its
    controlling terminal); returns (exit status, output)."""
    env = {k: v for k, v in env.items() if k not in ("NO_COLOR", "PY_COLORS", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:             # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


def check(rc, out, summary):
    assert b"\x1b[" in out, "no colour: the suite did not see a terminal"
    text = ANSI.sub(b"", out).decode("utf-8", "replace").replace("\r", "")
    assert rc == 0, text[-4000:]
    m = re.search(summary, text)
    assert m and int(m.group(1)) > 0, text[-2000:]


@pytest.mark.parametrize("suite", [
    "tests/integration/test_sandboxctl_session.py",   # sandboxctl's REPL
    "client/python/tests/test_sync.py",               # Ctrl-C, tool threads
])
def test_pytest_suite_passes_in_a_terminal(suite):
    rc, out = in_a_terminal(["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             suite], REPO, dict(os.environ))
    check(rc, out, r"(\d+) passed")


def test_exunit_suite_passes_in_a_terminal():
    if not shutil.which("mix"):
        pytest.skip("no mix here (make test-elixir installs Elixir)")
    env = dict(os.environ, SANDBOXD_BIN=SANDBOXD_BIN, MIX_ENV="test", HEX_OFFLINE="1",
               MIX_BUILD_ROOT=os.path.join(os.path.dirname(SANDBOXD_BIN), "elixir"))
    rc, out = in_a_terminal(["mix", "test", "test/sandboxd_test.exs"],
                            os.path.join(REPO, "client", "elixir"), env)
    check(rc, out, r"(\d+) tests, 0 failures")
