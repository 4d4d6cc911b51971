"""The supervisor's own lifecycle, seen from outside: shutdown, the socket
file, the zygote and the supply of workers, the warm pool's liveness, and
what outlives a killed supervisor.

Each test starts its own daemon (daemon_factory) because most of them stop,
starve or kill it on purpose.
"""

import os
import signal
import socket
import time

import pytest

import sbx
from sbx import NO_REPLY
from conftest import read_proc_stat

SCALE = sbx.SCALE
T = [{"name": "T", "functions": ["ready", "wait"]}]
IS_ROOT = os.geteuid() == 0
NOBODY = (65534, 65534)


def gone(pid):
    """pid has exited (a zombie counts: it runs no code)."""
    st = read_proc_stat(pid)
    return st is None or st[1] in ("Z", "X")


def wait_gone(pids, timeout=3.0 * SCALE):
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if not gone(p)]
        if not alive:
            return
        assert time.monotonic() < deadline, "processes still alive: %r" % [
            (p, read_proc_stat(p)) for p in alive]
        time.sleep(0.05)


# ------------------------------------------------------------------ shutdown

def test_execute_during_grace_is_refused_and_the_rest_answered(daemon_factory):
    """SIGTERM while an execution waits on a tool call, then a new execute
    during the grace period, then the tool answer: the new execute is refused
    at once with `cancelled` ("shutting down"), the waiting one finishes with
    its result, and the daemon exits 0 (it used to unqueue an execution that
    was never queued, wrap the queued counter and crash)."""
    d = daemon_factory(daemon={"shutdown_grace_ms": 10000 * SCALE}, check_stop=False)
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    b = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    c.wait_deferred(2)
    call_a = [x for x in c.deferred if x.execution_id == a][0]
    call_b = [x for x in c.deferred if x.execution_id == b][0]
    d.signal(signal.SIGTERM)
    d.wait_log("stopping")
    t0 = time.monotonic()
    r = c.execute("return 'late'", timeout=5 * SCALE)
    assert r.kind == "cancelled" and "shutting down" in r.message, r
    assert time.monotonic() - t0 < 2 * SCALE, "the refusal waited for the grace period"
    c.reply(call_a, "a-done")
    ra = c.wait(a)
    assert ra.ok and ra.result["value"] == "a-done", ra
    assert d.alive(), d.stderr[-3000:]
    c.reply(call_b, "b-done")
    rb = c.wait(b)
    assert rb.ok and rb.result["value"] == "b-done", rb
    assert d.proc.wait(10 * SCALE) == 0, d.stderr[-3000:]
    d.check_sanitizers()


# ------------------------------------------------------------------ the socket file

@pytest.mark.parametrize("replacement", ["file", "socket"])
def test_stop_leaves_a_replaced_socket_path_alone(daemon_factory, replacement):
    """The daemon removes its socket file at exit only if the path still
    names the socket it bound (same device and inode): a newer daemon's
    socket, or a file put there since, is left alone."""
    d = daemon_factory(check_stop=False)
    d.client().ping()
    os.unlink(d.socket_path)
    other = None
    if replacement == "file":
        with open(d.socket_path, "w") as f:
            f.write("not yours\n")
    else:
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.bind(d.socket_path)
        other.listen(1)
    ino = os.lstat(d.socket_path).st_ino
    try:
        assert d.stop() == 0, d.stderr[-3000:]
        assert os.path.lexists(d.socket_path), "the daemon removed a file it did not bind"
        assert os.lstat(d.socket_path).st_ino == ino
        d.wait_log("no longer the socket this daemon bound")
    finally:
        if other:
            other.close()
    d.check_sanitizers()


# ------------------------------------------------------------------ nothing outlives the supervisor

@pytest.mark.parametrize("as_user", [
    pytest.param(None, id="as-invoked"),
    pytest.param(NOBODY, id="as-nobody", marks=pytest.mark.skipif(
        not IS_ROOT, reason="starting a daemon as nobody needs root")),
])
def test_supervisor_killed_leaves_no_worker_or_zygote(daemon_factory, as_user):
    """SIGKILL the supervisor while a worker spins in a busy loop (and two
    pool workers wait): the running worker, the pooled ones and the zygote
    all die with it.  As root the workers change uid/gid, which clears the
    parent-death signal; it must be set again after the drop."""
    d = daemon_factory(daemon={"pool_size": 2}, run_as=as_user, check_stop=False)
    c = d.client()
    n = len(c.tool_calls)
    c.send_execute("T.ready() while true do end", tools=T, handlers={"T.ready": lambda a: True},
                   timeout_ms=60000 * SCALE)
    c.wait_tool_call(n + 1)
    pids = d.wait_for_workers(3)
    zygotes = [z[0] for z in d.zygotes()]
    assert zygotes, d.children()
    os.kill(d.pid, signal.SIGKILL)
    d.proc.wait(5 * SCALE)
    try:
        wait_gone(pids + zygotes)
    finally:
        for p in pids + zygotes:        # never leave a spinning orphan behind
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


# ------------------------------------------------------------------ verdicts keep the output before them

SPIN_THEN_PRINT = ("T.ready() local t = os.clock() while os.clock() - t < 0.3 do end "
                   "print('printed before the end') while true do end")


@pytest.mark.parametrize("verdict", ["timeout", "cancel"])
def test_output_printed_before_a_verdict_is_kept(daemon_factory, verdict):
    """Output already in the worker channel when the deadline passes (or a
    cancel arrives) is in data.output.  The test freezes the supervisor
    while the chunk prints, so that on waking it finds both the output and
    the expired deadline (or the cancel) at once."""
    d = daemon_factory()
    c = d.client()
    n = len(c.tool_calls)
    i = c.send_execute(SPIN_THEN_PRINT, tools=T, handlers={"T.ready": lambda a: True},
                       timeout_ms=(800 if verdict == "timeout" else 60000) * SCALE)
    c.wait_tool_call(n + 1)
    c.ping()                        # the tool answer has been passed on
    os.kill(d.pid, signal.SIGSTOP)
    try:
        time.sleep(1.3 * SCALE)     # the chunk printed at ~0.3 s; the deadline is past
        if verdict == "cancel":
            c.cancel(i)
            time.sleep(0.1)
    finally:
        os.kill(d.pid, signal.SIGCONT)
    r = c.wait(i)
    assert r.kind == ("timeout" if verdict == "timeout" else "cancelled"), r
    assert r.data["output"] == "printed before the end\n", r
    d.assert_no_leftovers()
