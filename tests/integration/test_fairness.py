"""Scheduling fairness and the warm pool.

* One connection with a deep backlog of queued executions must not starve
  another: the scheduler takes connections in turn (daemon/sched.c), so a
  request from a second client overtakes the first client's backlog.
* describe reports the warm pool: idle workers, workers started, and the
  private memory of the idle pooled workers; executions each get a fresh
  worker and the pool never grows past max_workers.

No timing assertions: order and counts only.
"""

import contextlib
import ctypes
import json
import os
import time

import pytest

import sbx
from conftest import wait_in_read
from sbx import SCALE

# A little work per execution (a few milliseconds), so a backlog of them
# takes long enough to overtake but not long enough to slow the suite.
WORK = "local x = 0 for i = 1, 300000 do x = x + i end return x"
WORK_VALUE = 45000150000
BACKLOG = 200


def state(client):
    r = client.call("describe", {})
    assert r.ok, r
    return r.result["state"]


def wait_state(client, pred, what, timeout=10.0 * SCALE):
    deadline = time.monotonic() + timeout
    while True:
        st = state(client)
        if pred(st):
            return st
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s; state %r" % (what, st))
        time.sleep(0.01)


def drain(client):
    """Handle every message that has already arrived, without waiting."""
    while client.pump(0):
        pass


def wait_answers(client, n, timeout=30.0 * SCALE):
    """Until at least n responses have arrived (none collected)."""
    deadline = time.monotonic() + timeout
    while len(client.arrivals) < n:
        assert time.monotonic() < deadline, "only %d answers arrived" % len(client.arrivals)
        client.pump(0.5)


def test_backlog_of_one_client_does_not_starve_another(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "pool_size": 1, "max_queue": 1000})
    a = d.client()
    b = d.client()
    ids = [a.send_execute(WORK, id=i) for i in range(1, BACKLOG + 1)]
    # A's backlog has been waiting a while: a few of its executions are done
    wait_answers(a, 3)
    st = state(b)
    assert st["queued"] >= BACKLOG // 4, \
        "A's waiting executions are not counted as queued: %r" % (st,)
    drain(a)
    answered_before = len(a.arrivals)

    bid = b.send_execute("return 'b'", id="b")
    rb = b.wait(bid, timeout=60.0 * SCALE)
    assert rb.ok and rb.result["value"] == "b", rb
    drain(a)
    overtaken_by = len(a.arrivals) - answered_before
    # B waits at most for the execution running when it arrived and the one
    # A's turn hands out next, not for A's backlog (a little slack for the
    # answers that arrive while we read)
    assert overtaken_by <= 10, (
        "B was answered only after %d more of A's %d queued executions" % (
            overtaken_by, BACKLOG - answered_before))
    assert BACKLOG - len(a.arrivals) >= BACKLOG // 8, \
        "B was not answered before most of A's backlog"

    # A's backlog still completes, every one of them
    for i in ids:
        r = a.wait(i, timeout=60.0 * SCALE)
        assert r.ok and r.result["value"] == WORK_VALUE, r


def test_round_robin_interleaves_two_backlogs(daemon_factory):
    """A client that queues a backlog after another's has been waiting gets
    every other turn, instead of waiting for the whole earlier backlog."""
    d = daemon_factory(daemon={"max_workers": 1, "pool_size": 1, "max_queue": 1000})
    a = d.client()
    b = d.client()
    n = 60
    a_ids = [a.send_execute(WORK, id="a%d" % i) for i in range(n)]
    wait_answers(a, 3)
    b_ids = [b.send_execute(WORK, id="b%d" % i) for i in range(n)]
    for i in b_ids[:10]:
        r = b.wait(i, timeout=60.0 * SCALE)
        assert r.ok, r
    drain(a)
    # turns alternate: about as many of A's ran meanwhile, far from all of them
    assert len(a.arrivals) <= 3 + 10 + 10, \
        "%d of A's %d executions ran before B's first 10" % (len(a.arrivals), n)
    for i in a_ids:
        assert a.wait(i, timeout=60.0 * SCALE).ok
    for i in b_ids[10:]:
        assert b.wait(i, timeout=60.0 * SCALE).ok


def test_max_queue_bounds_the_backlog(daemon_factory):
    """Executions waiting for a worker count against max_queue, however
    many arrive at once: the rest are refused with busy, not kept."""
    d = daemon_factory(daemon={"max_workers": 1, "pool_size": 1, "max_queue": 5})
    a = d.client()
    ids = [a.send_execute(WORK, id=i) for i in range(1, 31)]
    results = [a.wait(i, timeout=60.0 * SCALE) for i in ids]
    ok = [r for r in results if r.ok]
    busy = [r for r in results if not r.ok and r.kind == "busy"]
    assert len(ok) + len(busy) == len(ids), results
    # one running (or starting) plus at most max_queue waiting when the burst
    # is read; answers that come in meanwhile free room for a few more
    assert busy, "30 requests at once never found the queue of 5 full"
    assert all(r.result["value"] == WORK_VALUE for r in ok)


PTRACE_SEIZE = 0x4206
WALL = 0x40000000


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


@contextlib.contextmanager
def unreaped_after_death(pid):
    """pid seized by ptrace (it keeps running): once it dies, its exit is
    this test's to collect first, and its parent, the daemon, cannot reap
    it until the body is over and the test has waited for it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        pytest.skip("ptrace not permitted here: %s" % os.strerror(ctypes.get_errno()))
    try:
        yield
    finally:
        _, status = os.waitpid(pid, WALL)   # hands the exit on to the daemon
        assert os.WIFSIGNALED(status) or os.WIFEXITED(status), status


@pytest.mark.parametrize("pool", [0, 4])
def test_capacity_is_exact_while_an_answered_worker_exits(daemon_factory, pool):
    """max_workers 4, max_queue 8: an execution's slot is free once its
    answer is sent, even while its worker is still exiting (held unreaped
    here, deterministically).  Of 13 executions sent at once, 12 are
    accepted and run, the 13th is busy."""
    d = daemon_factory(daemon={"max_workers": 4, "max_queue": 8, "pool_size": pool})
    c = d.client()
    st = wait_state(c, lambda st: st["idle_workers"] == pool and st["workers"] == pool,
                    "a full pool")
    # An idle worker runs a little after it says it is ready (its look at
    # the channel): its CPU is taken once it sleeps in read(2), where it
    # stays until a job comes, so only the one given the job runs after.
    before = {}
    for p in d.wait_for_workers(pool) if pool else []:
        wait_in_read(p)
        before[p] = cpu_ns(p)
    held = c.send_execute("return T.f()", tools=[{"name": "T", "functions": ["f"]}],
                          handlers={"T.f": lambda *a: sbx.NO_REPLY})
    c.wait_deferred(1)
    mine = [p for p in d.wait_for_workers(1) if p not in before or cpu_ns(p) != before[p]]
    assert len(mine) == 1, (mine, before, d.children())
    with unreaped_after_death(mine[0]):
        c.reply(c.deferred[0], 7)
        assert c.wait(held).result["value"] == 7
        st = wait_state(c, lambda st: st["queued"] == 0 and st["idle_workers"] == st["workers"] - 1,
                        "nothing running, the answered worker not reaped")
        assert [p for p, _, state, _ in d.workers() if p == mine[0]], "reaped: %r" % st
        ids = list(range(1001, 1014))
        c.send_raw("".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "execute",
                                       "params": {"code": WORK}}) + "\n" for i in ids))
        last = c.wait(ids[-1])
        assert not last.ok and last.kind == "busy", last
        assert "all 4 workers are busy and 8 executions are queued" in last.message, last
    for i in ids[:-1]:                  # the neighbours under the bound all run
        r = c.wait(i, timeout=60 * SCALE)
        assert r.ok and r.result["value"] == WORK_VALUE, r
    d.assert_no_leftovers(allowed_idle=pool)


def test_describe_reports_the_warm_pool(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 4, "pool_size": 3})
    c = d.client()
    st = wait_state(c, lambda st: st["idle_workers"] == 3, "a full pool of 3")
    for key in ("workers", "idle_workers", "queued", "workers_started",
                "idle_worker_private_bytes"):
        assert key in st, (key, st)
    assert st["workers"] == 3 and st["workers_started"] >= 3, st
    priv = st["idle_worker_private_bytes"]
    if os.geteuid() == 0:
        # the supervisor can read its workers' smaps_rollup
        assert isinstance(priv, int) and 0 < priv < 3 * 64 * 1024 * 1024, st
    else:
        assert priv is None or isinstance(priv, int), st
    pooled = set(d.wait_for_workers(3))

    # every execution runs in a worker no other execution used, taken from
    # the pool and replaced
    started = st["workers_started"]
    for _ in range(5):
        assert c.value("return 1") == 1
    st = wait_state(c, lambda st: st["idle_workers"] == 3, "the pool refilled")
    assert st["workers_started"] - started >= 5, st
    # the pool hands out its oldest worker first, so each of the three ran
    # one of the five jobs; a worker's exit after its job can still be under
    # way when the refill is counted (ASan's exit, a loaded machine), so the
    # check waits for them to go: one handed a second job never would
    deadline = time.monotonic() + sbx.SAFETY_NET
    while pooled & set(d.worker_pids()):
        assert time.monotonic() < deadline, "a worker that ran a job is still alive"
        time.sleep(0.02)


def test_pool_never_grows_past_max_workers(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 2, "pool_size": 2, "max_queue": 100})
    a = d.client()
    watcher = d.client()
    ids = [a.send_execute(WORK, id=i) for i in range(20)]
    most = 0
    pending = set(ids)
    while pending:
        st = state(watcher)
        most = max(most, st["workers"])
        assert len([w for w in d.workers() if w[2] != "Z"]) <= 2, d.children()
        drain(a)
        pending -= {r.id for r in a.arrivals}
    assert most <= 2
    for i in ids:
        assert a.wait(i).ok


@pytest.mark.parametrize("pool", [0, 2])
def test_executions_never_share_a_worker(daemon_factory, pool):
    """Globals a chunk sets never reach the next execution: each one starts
    in a fresh worker, with or without a warm pool."""
    d = daemon_factory(daemon={"max_workers": 2, "pool_size": pool})
    c = d.client()
    for _ in range(5):
        assert c.value("local seen = leftover; leftover = true; return seen == nil") is True
