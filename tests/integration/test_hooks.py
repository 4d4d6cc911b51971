"""A worker that issues a forbidden system call, through the test-only hook.

Runs only against the test-hooks build (`make test-hooks`: -DSANDBOXD_TEST_HOOKS=1
adds sandboxd_test.syscall(nr) to the Lua environment).  Pure Lua has no way to
make a forbidden call, which is the point of the sandbox; the hook plays a
worker whose Lua had been subverted.  The expected outcome, whatever the uid and
architecture: the execution is answered `crashed` (signal 31, SIGSYS) with what
it printed before, the daemon logs the call, no worker is left, and the daemon
and the same connection go on working.  (test_containment.py does the same
from outside with ptrace, against the production binary, as root on x86_64.)
"""
import os
import pytest

from conftest import SANDBOXD_BIN

HOOKS = os.environ.get("SANDBOXD_TEST_HOOKS") == "1"
pytestmark = pytest.mark.skipif(not HOOKS, reason="needs the test-hooks build (make test-hooks)")

# number, name as the daemon reports it, per architecture
FORBIDDEN = {
    "x86_64": [(41, "socket"), (57, "fork"), (59, "execve"), (2, "open"), (62, "kill")],
    "aarch64": [(198, "socket"), (221, "execve"), (56, "openat"), (129, "kill")],
}.get(os.uname().machine, [])


def test_hook_present_in_this_build_only():
    with open(SANDBOXD_BIN, "rb") as f:
        assert b"sandboxd_test" in f.read()
    prod = os.path.join(os.path.dirname(os.path.dirname(SANDBOXD_BIN)), "sandboxd")
    if os.path.exists(prod):
        with open(prod, "rb") as f:
            assert b"sandboxd_test" not in f.read(), "the production build has the test hook"


def test_allowed_call_through_the_hook(daemon):
    """The hook itself works: an allowed call (gettimeofday(NULL, NULL))
    returns 0 instead of killing the worker."""
    nr = {"x86_64": 96, "aarch64": 169}.get(os.uname().machine)
    if nr is None:
        pytest.skip("no syscall table for this architecture")
    c = daemon.client()
    assert c.value("return sandboxd_test.syscall(%d)" % nr) == 0
    c.close()


@pytest.mark.skipif(not FORBIDDEN, reason="no syscall table for this architecture")
@pytest.mark.parametrize("nr,name", FORBIDDEN, ids=[n for _, n in FORBIDDEN])
def test_forbidden_call_is_crashed_and_daemon_lives(daemon, nr, name):
    c = daemon.client()
    r = c.execute("print('pre') sandboxd_test.syscall(%d) return 'survived'" % nr)
    assert r.code == -32007 and r.kind == "crashed", r
    assert r.data["signal"] == 31, r
    assert r.data.get("syscall") == nr, r
    assert r.data.get("syscall_name") == name, r
    assert r.data.get("output") == "pre\n", r
    assert "stats" in r.data, r
    daemon.wait_log(r"forbidden system call %d \(%s\)" % (nr, name))
    daemon.assert_no_leftovers()
    assert c.value("return 1 + 1") == 2          # the same connection goes on
    c.close()
    daemon.assert_alive()


def test_forbidden_calls_in_parallel(daemon):
    """Many workers dying by SIGSYS at once, beside ordinary executions."""
    if not FORBIDDEN:
        pytest.skip("no syscall table for this architecture")
    nr = FORBIDDEN[0][0]
    c = daemon.client()
    bad = [c.send_execute("sandboxd_test.syscall(%d)" % nr) for _ in range(12)]
    good = [c.send_execute("return %d" % i) for i in range(12)]
    for i in bad:
        r = c.wait(i)
        assert r.kind == "crashed", r
    for k, i in enumerate(good):
        r = c.wait(i)
        assert r.ok and r.result["value"] == k, r
    daemon.assert_no_leftovers()
    daemon.assert_alive()


@pytest.mark.skipif(not FORBIDDEN, reason="no syscall table for this architecture")
def test_forbidden_call_in_a_session_ends_it(daemon):
    """A session chunk whose worker dies (crashed) ends the session
    (docs/protocol.md §3.8): data.session_closed, then session_not_found."""
    c = daemon.client()
    r = c.call("session/open", {})
    assert r.ok, r
    sid = r.result["session"]
    assert c.execute("x = 1", session=sid).ok
    r = c.execute("sandboxd_test.syscall(%d)" % FORBIDDEN[0][0], session=sid)
    assert r.kind == "crashed" and r.data["session_closed"] is True, r
    r = c.execute("return x", session=sid)
    assert r.kind == "session_not_found", r
    daemon.assert_no_leftovers()
    assert c.value("return 1 + 1") == 2
