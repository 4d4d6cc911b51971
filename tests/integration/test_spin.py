"""A worker waiting for a tool answer, or a session's worker waiting for its
next chunk, looks at its channel before it sleeps ([daemon] tool_spin_us,
docs/sandboxd.conf.5; worker/look.c): the
look is the execution's own CPU time, so what it costs is seen in
stats.cpu_us, the supervisor's measurement of the worker.  The look adapts
(a slow tool soon stops being looked for), happens only while the busy
workers are fewer than the CPUs, and never changes what a chunk gets.

Whether a worker looks is asserted on a count, its poll(2) calls traced
(PollCounter): a look makes one at least, however little CPU a loaded
machine gives it, and a worker that does not look makes none.  What a look
costs is asserted as CPU time, and only from above: a loaded machine gives
the worker less CPU, which only lowers it; a look that does not shrink
costs tens to hundreds of ms even on half a CPU.  tests/unit/test_look.c
states the bound and the window exactly."""

import ctypes
import os
import threading
import time

import pytest

import sbx
from conftest import wait_in_read
from sbx import NO_REPLY

T = {"name": "T", "functions": ["f"]}
SPIN_MAX = 10000            # us: CHAN_SPIN_US_MAX, the largest tool_spin_us
NORMAL = {"priority": "normal"}     # ahead of other low-priority work on a busy machine


def base_cpu_us(c, n=3):
    """The CPU of a trivial execution on a fresh worker (its set-up)."""
    return min(c.exec_ok("return 1")["stats"]["cpu_us"] for _ in range(n))


def settle(c):
    """Wait until the workers of earlier executions are gone (pool_size is
    0), so that the one measured is the only worker."""
    deadline = time.monotonic() + sbx.SAFETY_NET
    while c.call("describe").result["state"]["workers"] > 0:
        assert time.monotonic() < deadline, "a worker is left over"
        time.sleep(0.01)


def slow_calls(c, n, delay):
    """cpu_us of an execution making n sequential calls, each answered after delay s."""
    settle(c)

    def f(a):
        time.sleep(delay)
        return a[0]
    r = c.exec_ok("local s = 0 for i = 1, %d do s = s + T.f(i) end return s" % n,
                  tools=[T], handlers={"T.f": f}, limits=NORMAL)
    assert r["value"] == n * (n + 1) // 2
    assert r["stats"]["tool_calls"] == n
    return r["stats"]["cpu_us"]


def two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs: with one, the daemon never looks")


def test_describe_reports_tool_spin_us(daemon_factory, client):
    assert client.call("describe").result["daemon"]["tool_spin_us"] == 200    # the default
    for us in (0, SPIN_MAX):
        d = daemon_factory(daemon={"tool_spin_us": us})
        with d.client() as c:
            assert c.call("describe").result["daemon"]["tool_spin_us"] == us


def test_slow_tool_costs_a_bounded_look(daemon_factory):
    """40 calls answered after 15 ms each: the first wait looks for 10 ms, each
    later one for half as long, down to none (about 20 ms in all).  A look
    that did not shrink would cost 40 x 10 ms."""
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX})
    with d.client() as c:
        cpu = slow_calls(c, 40, 0.015)
    assert cpu < 100000, "40 slow tool calls cost %d us of the worker's CPU" % cpu


def test_a_slow_answer_is_looked_for(daemon_factory):
    """With a CPU to spare the worker looks before it sleeps (5 slow calls:
    a look polls its channel once at least, and halves at most once a
    wait, so the first waits are looked at however slow the machine); with
    tool_spin_us = 0 it sleeps at once: not one poll(2).  Counted, not timed
    (PollCounter)."""
    two_cpus()
    polls = {}
    for us in (SPIN_MAX, 0):
        d = daemon_factory(daemon={"tool_spin_us": us})
        with d.client() as c:
            polls[us] = polls_of_slow_calls(d, c, 5, 0.05)
    assert polls[SPIN_MAX] > 0 and polls[0] == 0, polls


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def test_back_to_back_executions_each_look(daemon_factory):
    """A worker killed after its answer is no longer busy, though not reaped
    yet: with a warm pool the next job starts at once, and must still look
    for its answers.  The answered worker is held unreaped (seized by
    ptrace: its exit is the test's to collect first), so the next answer is
    sent while it is, whatever the load; the look is counted (PollCounter)."""
    two_cpus()
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX, "max_workers": 2, "pool_size": 2},
                       cpus=set(sorted(os.sched_getaffinity(0))[:2]))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    with d.client() as c:
        pool = d.wait_for_workers(2)
        for p in pool:
            wait_in_read(p)             # set up, waiting for a job
        before = {p: cpu_ns(p) for p in pool}
        held = c.send_execute("return T.f(1)", tools=[T], handlers={"T.f": lambda a: NO_REPLY},
                              limits=NORMAL)
        call = c.wait_deferred(1)
        mine = [p for p in pool if cpu_ns(p) != before[p]]
        assert len(mine) == 1, (mine, d.children())
        if libc.ptrace(PTRACE_SEIZE, mine[0], None, None) != 0:
            pytest.skip("ptrace not permitted here: %s" % os.strerror(ctypes.get_errno()))
        try:
            c.reply(call, result=1)
            assert c.wait(held).result["value"] == 1
            assert [p for p, _, _, _ in d.workers() if p == mine[0]], "reaped already"

            # The next execution's first call is held until its worker
            # sleeps in read: a pooled worker is not traced (the daemon
            # replaces one it finds in a tracing stop), and the answer to
            # that call, sent while the killed worker is still unreaped,
            # says how long to look for the second.
            def f(a):
                if a[0] == 2:
                    return NO_REPLY
                time.sleep(0.05)
                return a[0]
            i = c.send_execute("return T.f(2) + T.f(3)", tools=[T], handlers={"T.f": f},
                               limits=NORMAL)
            second = c.wait_deferred(2)
            worker = [p for p in d.worker_pids() if p != mine[0]]
            assert len(worker) == 1, (worker, d.children())
            wait_in_read(worker[0])
            with PollCounter(worker[0]) as looks:
                c.reply(second, result=2)
                r = c.wait(i)
            assert r.ok and r.result["value"] == 5, r
        finally:
            _, status = os.waitpid(mine[0], WALL)   # hands the exit on to the daemon
        assert os.WIFSIGNALED(status) or os.WIFEXITED(status), status
    assert looks.polls > 0, "the next job did not look for its answer"


def test_no_look_when_every_cpu_has_work(daemon_factory):
    """A daemon on one CPU: the worker is the busy one (1 >= 1 CPU), so the
    job and every answer say 0 and it sleeps at once, even with the largest
    tool_spin_us: not one poll(2) over 5 slow calls; its look could only
    take the CPU the supervisor needs."""
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX}, cpus={min(os.sched_getaffinity(0))})
    with d.client() as c:
        # many workers first, each killed or exiting by itself after its
        # answer: the count of the killed ones must come back to 0 each time
        base_cpu_us(c, 40)
        polls = polls_of_slow_calls(d, c, 5, 0.05)
    assert polls == 0, "5 slow calls on one CPU made %d poll calls" % polls


def test_parallel_answered_in_reverse_while_looking(daemon_factory):
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX})
    with d.client() as c:
        i = c.send_execute("local fs = {} for k = 1, 16 do fs[k] = function() return T.f(k) end end "
                           "return parallel(table.unpack(fs))",
                           tools=[T], handlers={"T.f": lambda a: NO_REPLY}, limits=NORMAL)
        calls = [c.wait_deferred(k) for k in range(1, 17)]
        assert sorted(x.args[0] for x in calls) == list(range(1, 17))
        for x in reversed(calls):
            time.sleep(0.002)
            c.reply(x, result=x.args[0] * 10)
        r = c.wait(i)
        assert r.ok, r
        assert r.result["value"] == [k * 10 for k in range(1, 17)]
        assert r.result["stats"]["tool_calls"] == 16


def test_session_chunks_with_tool_calls_while_looking(daemon_factory):
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX})
    with d.client() as c:
        r = c.call("session/open", {"tools": [T], "limits": NORMAL})
        assert r.ok, r
        sid = r.result["session"]
        handlers = {"T.f": lambda a: a[0] + 1}
        for k, code in enumerate([
                "n = T.f(1) + T.f(2) return n",                     # 2 + 3
                "n = n + T.f(n) return n",                          # 5 + 6
                "return parallel(function() return T.f(n) end, function() return T.f(-n) end)",
        ]):
            r = c.execute(code, session=sid, handlers=handlers)
            assert r.ok, (k, r)
            assert r.result["value"] == [5, 11, [12, -10]][k], (k, r)
        assert c.call("session/close", {"session": sid}).ok


PTRACE_SYSCALL, PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 24, 17, 0x4206, 0x4207
PTRACE_PEEKUSER, PTRACE_O_TRACESYSGOOD, PTRACE_EVENT_STOP = 3, 1, 128
WALL = 0x40000000
ORIG_RAX = 15                       # index in struct user_regs_struct (x86_64)
SYS_READ, SYS_POLL, SYS_PPOLL = 0, 7, 271


def in_read(pid, fd=3):
    """Whether pid sleeps in read(2) on fd (or is stopped entering it)."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            fields = f.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == fd


class PollCounter(threading.Thread):
    """Counts the poll(2) calls of pid (a look makes one at least) while
    traced: from start() until stop(), with ptrace's syscall stops (every
    ptrace request comes from this thread, the tracer).  A count, not a CPU
    time: what a loaded machine does to the clocks cannot change it.  pid
    must sleep in read(2) when the tracing starts, and is let go only at a
    read: a poll(2) interrupted by a stop restarts as restart_syscall, which
    the worker's filter kills (SIGSYS), where a read restarts as itself."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.polls, self.error = pid, 0, None
        self.ready, self.done = threading.Event(), threading.Event()

    def __enter__(self):
        self.start()
        assert self.ready.wait(10 * sbx.SCALE), "the tracer did not start"
        if self.error:
            pytest.skip(self.error)
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join(10 * sbx.SCALE)
        assert not self.is_alive(), "the tracer did not detach"

    def run(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        libc.ptrace.restype = ctypes.c_long
        pid = self.pid
        if libc.ptrace(PTRACE_SEIZE, pid, None, PTRACE_O_TRACESYSGOOD) != 0:
            self.error = "ptrace not permitted here: %s" % os.strerror(ctypes.get_errno())
            self.ready.set()
            return
        stopping, pass_on = False, 0
        try:
            libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
            os.waitpid(pid, WALL)
            libc.ptrace(PTRACE_SYSCALL, pid, None, None)
            self.ready.set()
            while True:
                got, status = os.waitpid(pid, WALL | os.WNOHANG)
                if got == 0:
                    if self.done.is_set() and not stopping and in_read(pid):
                        libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
                        stopping = True
                    time.sleep(0.001)
                    continue
                if not os.WIFSTOPPED(status):
                    return                              # gone
                sig, nr = os.WSTOPSIG(status), None
                if sig == 0x85:                         # SIGTRAP | 0x80: a syscall stop
                    nr = libc.ptrace(PTRACE_PEEKUSER, pid, 8 * ORIG_RAX, None)
                    self.polls += nr in (SYS_POLL, SYS_PPOLL)
                pass_on = 0 if nr is not None or status >> 16 == PTRACE_EVENT_STOP else sig
                if self.done.is_set() and (nr == SYS_READ or stopping and nr is None and
                                           status >> 16 == PTRACE_EVENT_STOP):
                    return              # at a read: it goes on as a read, whatever is pending
                libc.ptrace(PTRACE_SYSCALL, pid, None, pass_on)
        finally:
            self.ready.set()
            libc.ptrace(PTRACE_DETACH, pid, None, pass_on)


def polls_of_slow_calls(d, c, n, delay):
    """The poll(2) calls of an execution's worker while it waits for n
    sequential tool answers, each given after delay s: traced from its
    first wait (held until the tracer is on) to its answer."""
    settle(c)

    def f(a):
        if a[0] == 0:
            return NO_REPLY
        time.sleep(delay)
        return a[0]
    i = c.send_execute("local s = T.f(0) for i = 1, %d do s = s + T.f(i) end return s" % n,
                       tools=[T], handlers={"T.f": f}, limits=NORMAL)
    call = c.wait_deferred(1)
    worker = d.wait_for_workers(1)
    assert len(worker) == 1, worker
    wait_in_read(worker[0])             # past its look for the held answer
    with PollCounter(worker[0]) as looks:
        c.reply(call, result=0)
        r = c.wait(i)
    assert r.ok and r.result["value"] == n * (n + 1) // 2, r
    assert r.result["stats"]["tool_calls"] == n + 1, r
    return looks.polls


def test_session_chunk_takes_the_look_of_its_own_job(daemon_factory):
    """A session keeps its worker between chunks, while the other work can
    change: each chunk's job says how long to look, as each answer does.
    Here a second execution, waiting for a tool answer, is busy too when the
    second chunk starts (2 busy workers on 2 CPUs), so that chunk's slow
    call is not looked for, whatever the first chunk's answers said: the
    session's worker makes no poll(2) at all from the chunk's arrival to its
    answer (a look makes one at least, however short)."""
    two_cpus()
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX},
                       cpus=set(sorted(os.sched_getaffinity(0))[:2]))
    with d.client() as c, d.client() as other:
        settle(c)
        r = c.call("session/open", {"tools": [T], "limits": NORMAL})
        assert r.ok, r
        sid = r.result["session"]
        r = c.execute("return T.f(1)", session=sid, handlers={"T.f": lambda a: a[0]})
        assert r.ok and r.result["value"] == 1, r      # answered at once: the look stays whole
        worker = d.wait_for_workers(1)
        assert len(worker) == 1, worker
        held = other.send_execute("return T.f(2)", tools=[T],
                                  handlers={"T.f": lambda a: NO_REPLY})
        call = other.wait_deferred(1)
        wait_in_read(worker[0])         # past its look for the next chunk

        def slow(a):
            time.sleep(0.05)
            return a[0]
        with PollCounter(worker[0]) as looks:
            r = c.execute("return T.f(3)", session=sid, handlers={"T.f": slow})
        assert r.ok and r.result["value"] == 3, r
        other.reply(call, result=2)
        assert other.wait(held).ok
        assert c.call("session/close", {"session": sid}).ok
    assert looks.polls == 0, "the chunk's worker looked (%d poll calls)" % looks.polls


def session_worker_cpu_us(d):
    """The CPU so far of the one live worker (pool_size is 0: the session's)."""
    w = [c for c in d.workers() if c[2] != "Z"]
    assert len(w) == 1, w
    return w[0][3] * 1e6 / os.sysconf("SC_CLK_TCK")


def chunks_with_gaps(d, c, n, gap):
    """The session worker's CPU over n chunks sent gap s after each answer."""
    settle(c)
    r = c.call("session/open", {"limits": NORMAL})
    assert r.ok, r
    sid = r.result["session"]
    assert c.execute("x = 0", session=sid).ok
    before = session_worker_cpu_us(d)
    for k in range(n):
        time.sleep(gap)
        r = c.execute("x = x + 1 return x", session=sid)
        assert r.ok and r.result["value"] == k + 1, r
    used = session_worker_cpu_us(d) - before
    return sid, used


def test_session_worker_looks_for_its_next_chunk(daemon_factory):
    """Between chunks the worker looks for the next job as for a tool answer:
    with the largest window it polls its channel after an answer (a look
    makes one poll(2) at least, and halves at most once a gap, so some of
    30 gaps are looked at however slow the machine); with tool_spin_us = 0
    it goes straight to sleep in read(2): not one poll.  Counted, not timed
    (PollCounter)."""
    two_cpus()
    polls = {}
    for us in (SPIN_MAX, 0):
        d = daemon_factory(daemon={"tool_spin_us": us})
        with d.client() as c:
            settle(c)
            r = c.call("session/open", {"limits": NORMAL})
            assert r.ok, r
            sid = r.result["session"]
            assert c.execute("x = 0", session=sid).ok
            worker = d.wait_for_workers(1)
            assert len(worker) == 1, worker
            wait_in_read(worker[0])     # past its look for the next chunk
            with PollCounter(worker[0]) as looks:
                for k in range(30):
                    time.sleep(0.004)
                    r = c.execute("x = x + 1 return x", session=sid)
                    assert r.ok and r.result["value"] == k + 1, r
            polls[us] = looks.polls
            assert c.call("session/close", {"session": sid}).ok
    assert polls[SPIN_MAX] > 0 and polls[0] == 0, polls


def test_slow_chunks_cost_a_bounded_look_and_idle_stays_idle(daemon_factory):
    """Chunks 20 ms apart: the look halves after each gap, down to none
    (about 20 ms in all); one that did not shrink would cost 30 x 10 ms.
    Then a second of idleness: the looking was not the worker's CPU used
    between chunks, which ends a session (IDLE_CPU_MAX_US, daemon/exec.c)."""
    d = daemon_factory(daemon={"tool_spin_us": SPIN_MAX})
    with d.client() as c:
        sid, used = chunks_with_gaps(d, c, 30, 0.02)
        assert used < 100000, "30 slow chunks cost %d us of the worker's CPU" % used
        time.sleep(1.5)
        r = c.execute("return x", session=sid)
        assert r.ok and r.result["value"] == 30, r
        assert c.call("session/close", {"session": sid}).ok
