"""Shards ([daemon] shards, daemon/spawn.h): with n > 1 the daemon runs one
zygote per CPU, on the first n CPUs it may run on, each pinned with every
worker it forks; pooled workers are asked from every shard, a session keeps
its worker (and so its CPU), and a dead zygote is restarted on its own CPU
while the other shards go on serving.  Nothing here asserts on timing."""

import contextlib
import os
import signal
import time

import pytest

import sbx

NEEDS_2 = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


def cpus_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None


def wait_until(pred, what, timeout=60.0):
    deadline = time.monotonic() + timeout * sbx.SCALE
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def first_cpus(n):
    return [str(c) for c in sorted(os.sched_getaffinity(0))[:n]]


@contextlib.contextmanager
def held(d, n):
    """n executions of d held in a tool call each; yields the busy workers'
    pids (n of them), then answers the calls and checks each value."""
    c = d.client()
    T = {"name": "T", "functions": ["wait"]}
    ids = [c.send_execute("return T.wait()", tools=[T], handlers={"T.wait": lambda a: sbx.NO_REPLY})
           for _ in range(n)]
    c.wait_tool_call(n)
    busy = d.worker_pids()
    assert len(busy) == n, d.children()
    yield busy
    for call in c.tool_calls:
        c.reply(call, result=7)
    for i in ids:
        assert c.wait(i).result["value"] == 7
    c.close()


@NEEDS_2
def test_one_zygote_per_shard_each_pinned_with_its_workers(daemon_factory):
    d = daemon_factory(daemon={"shards": 2, "pool_size": 4})
    zs = wait_until(lambda: len(d.zygotes()) == 2 and d.zygotes(), "two zygotes")
    assert sorted(cpus_of(z[0]) for z in zs) == first_cpus(2)
    # the pool is asked from both shards: workers on both CPUs
    wait_until(lambda: sorted({cpus_of(p) for p in d.worker_pids()}) == first_cpus(2),
               "pooled workers on both CPUs: %r" % d.children())
    with d.client() as c:
        for i in range(20):
            assert c.value("return %d * 2" % i) == i * 2


@NEEDS_2
def test_two_executions_at_once_run_on_both_cpus(daemon_factory):
    """Both shards' workers serve: two executions held at once (a tool call
    each) run on different CPUs, the idle CPU's worker taken second."""
    d = daemon_factory(daemon={"shards": 2, "pool_size": 2, "max_workers": 2})
    wait_until(lambda: len(d.worker_pids()) == 2, "a full pool")
    with held(d, 2) as busy:        # max_workers 2: both are busy, none pooled
        assert sorted(cpus_of(p) for p in busy) == first_cpus(2), d.children()


@NEEDS_2
def test_a_third_execution_on_two_cpus_is_not_pinned(daemon_factory):
    """At most one busy worker is pinned per CPU: the job that finds every
    CPU busy goes to an unpinned worker, which can move to whichever CPU
    frees up first (a pinned one would keep a CPU-bound job on a crowded
    CPU, below the share its cpu_ms assumes)."""
    d = daemon_factory(daemon={"shards": 2, "pool_size": 3, "max_workers": 3})
    wait_until(lambda: len(d.worker_pids()) == 3, "a full pool")
    with held(d, 3) as busy:        # max_workers 3: all three are busy
        every = cpus_of(d.pid)
        assert sorted(cpus_of(p) for p in busy) == sorted(first_cpus(2) + [every]), \
            [(p, cpus_of(p)) for p in busy]


@NEEDS_2
def test_session_keeps_its_worker_across_chunks(daemon_factory):
    d = daemon_factory(daemon={"shards": 2, "pool_size": 2})
    with d.client() as c:
        sid = c.call("session/open", {}).result["session"]
        for i in range(1, 11):
            r = c.execute("n = (n or 0) + 1 return n", session=sid)
            assert r.ok and r.result["value"] == i, r
            # stateless executions between the chunks run on other workers
            assert c.value("return 1") == 1
        c.call("session/close", {"session": sid})


@NEEDS_2
def test_a_dead_zygote_is_restarted_on_its_cpu_and_the_other_shard_serves(daemon_factory):
    d = daemon_factory(daemon={"shards": 2, "pool_size": 2})
    zs = wait_until(lambda: len(d.zygotes()) == 2 and d.zygotes(), "two zygotes")
    victim = next(z[0] for z in zs if cpus_of(z[0]) == first_cpus(2)[1])
    other = next(z[0] for z in zs if z[0] != victim)
    os.kill(victim, signal.SIGKILL)
    with d.client() as c:
        assert c.value("return 'served'", timeout_ms=10000 * sbx.SCALE) == "served"
        new = wait_until(lambda: [z[0] for z in d.zygotes() if z[0] not in (victim, other)],
                         "a new zygote: %r" % d.children())
        assert cpus_of(new[0]) == first_cpus(2)[1]
        assert other in [z[0] for z in d.zygotes()], "the other shard's zygote was restarted"
        d.wait_log(r"zygote died")
        for i in range(10):
            assert c.value("return %d" % i) == i
    d.assert_no_leftovers(allowed_idle=2)


def test_more_shards_than_cpus_is_one_per_cpu(daemon_factory):
    n = len(os.sched_getaffinity(0))
    d = daemon_factory(daemon={"shards": 64})
    zs = wait_until(lambda: d.zygotes(), "a zygote")
    time.sleep(0.2)
    zs = d.zygotes()
    assert len(zs) == n, d.children()
    with d.client() as c:
        assert c.value("return 1") == 1


def test_one_shard_is_not_pinned(daemon_factory):
    d = daemon_factory(daemon={"shards": 1})
    zs = wait_until(lambda: d.zygotes(), "a zygote")
    assert len(zs) == 1
    assert cpus_of(zs[0][0]) == cpus_of(d.pid)
