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

# The longest shutdown_grace_ms the config takes (a day): a test that needs
# something done "at once, not after the grace" gets it before that, or not
# at all within SAFETY_NET.
GRACE_DAY = 86400000
# A wait for an event that must come: a safety net against a hang only,
# minutes, so that a loaded machine never trips it.
SAFETY_NET = 120 * SCALE

def test_execute_during_grace_is_refused_and_the_rest_answered(daemon_factory):
    """SIGTERM while an execution waits on a tool call, then a new execute
    during the grace period, then the tool answer: the new execute is refused
    at once with `cancelled` ("shutting down"), the waiting one finishes with
    its result, and the daemon exits 0 (it used to unqueue an execution that
    was never queued, wrap the queued counter and crash)."""
    # a grace of a day (the most the config takes): "at once" is before it,
    # and while a and b still wait for their tool answers
    d = daemon_factory(daemon={"shutdown_grace_ms": GRACE_DAY}, check_stop=False)
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    b = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    c.wait_deferred(2)
    call_a = [x for x in c.deferred if x.execution_id == a][0]
    call_b = [x for x in c.deferred if x.execution_id == b][0]
    d.signal(signal.SIGTERM)
    d.wait_log("stopping")
    r = c.execute("return 'late'", timeout=SAFETY_NET)
    assert r.kind == "cancelled" and "shutting down" in r.message, r
    assert not [x for x in c.arrivals if x.id in (a, b)], c.arrivals
    c.reply(call_a, "a-done")
    ra = c.wait(a)
    assert ra.ok and ra.result["value"] == "a-done", ra
    assert d.alive(), d.stderr[-3000:]
    c.reply(call_b, "b-done")
    rb = c.wait(b)
    assert rb.ok and rb.result["value"] == "b-done", rb
    assert d.proc.wait(10 * SCALE) == 0, d.stderr[-3000:]
    d.check_sanitizers()


def test_sigterm_answers_executions_not_started_at_once(daemon_factory):
    """On SIGTERM, executions that have no worker yet - queued behind a busy
    one, or admitted and waiting for a worker the (stopped) zygote does not
    make - are answered `cancelled` at once, not after the grace period;
    the running one still finishes."""
    d = daemon_factory(daemon={"max_workers": 2, "shutdown_grace_ms": GRACE_DAY},
                       check_stop=False)
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    z = wait_zygote(d)
    stop_and_wait([z])
    try:
        waiting = c.send_execute("return 'waiting'")      # admitted, no worker comes
        queued = [c.send_execute("return 'queued'") for _ in range(2)]
        c.ping()
        d.signal(signal.SIGTERM)
        # at once: within a grace of a day, while a still waits for its tool
        for i in [waiting] + queued:
            r = c.wait(i, timeout=SAFETY_NET)
            assert r.kind == "cancelled" and "shutting down" in r.message, r
        assert not [x for x in c.arrivals if x.id == a], c.arrivals
    finally:
        os.kill(z, signal.SIGCONT)
    c.reply(call, "a-done")
    ra = c.wait(a)
    assert ra.ok and ra.result["value"] == "a-done", ra
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


def wait_stopped(pid, timeout=10.0 * SCALE):
    """Wait until pid is in the stopped state (T): it runs no more."""
    deadline = time.monotonic() + timeout
    while True:
        st = read_proc_stat(pid)
        assert st, "%d is gone" % pid
        if st[1] == "T":
            return
        assert time.monotonic() < deadline, st
        time.sleep(0.01)


def answered(c, i):
    """Whether the answer to request i is here, after reading everything the
    (stopped) daemon sent before it stopped."""
    while c.pump(0.2):
        pass
    return any(r.id == i for r in c.arrivals)


@pytest.mark.parametrize("verdict", ["timeout", "cancel"])
def test_output_printed_before_a_verdict_is_kept(daemon_factory, verdict):
    """Output already in the worker channel when the deadline passes (or a
    cancel arrives) is in data.output.  The test freezes the supervisor
    while the chunk prints, so that on waking it finds both the output and
    the expired deadline (or the cancel) at once."""
    d = daemon_factory()
    c = d.client()
    ticks = os.sysconf("SC_CLK_TCK")
    ms = (800 if verdict == "timeout" else 60000) * SCALE
    while True:
        # Under load the worker can reach T.ready, or the test freeze the
        # supervisor, after the deadline: then nothing was printed before
        # it, which says nothing of the output kept.  Again with twice the
        # time, until the deadline comes while the supervisor is frozen.
        n = len(c.tool_calls)
        i = c.send_execute(SPIN_THEN_PRINT, tools=T, handlers={"T.ready": lambda a: True},
                           timeout_ms=ms)
        t0 = time.monotonic()
        while len(c.tool_calls) == n and not answered(c, i):
            assert time.monotonic() - t0 < sbx.DEFAULT_TIMEOUT, "neither T.ready nor an answer"
        if len(c.tool_calls) > n:
            c.ping()                # the tool answer has been passed on
            os.kill(d.pid, signal.SIGSTOP)
            wait_stopped(d.pid)
            if not answered(c, i):
                pid = d.wait_for_workers(1)[0]
                break
            os.kill(d.pid, signal.SIGCONT)
        r = c.wait(i)
        assert r.kind == "timeout" and verdict == "timeout" and ms < 20000 * SCALE, (ms, r)
        d.assert_no_leftovers()
        ms *= 2
    try:
        # the chunk has printed (0.3 s of its CPU time are spent; under load
        # that takes longer than 0.3 s) and the deadline is past
        past = 1.5 * ms / 1000 if verdict == "timeout" else 1.2 * SCALE
        deadline = time.monotonic() + 30 * SCALE
        while (read_proc_stat(pid) or ("", "", 0, 10 ** 9))[3] < 0.4 * ticks or \
                time.monotonic() - t0 < past:
            assert time.monotonic() < deadline, read_proc_stat(pid)
            time.sleep(0.05)
        if verdict == "cancel":
            c.cancel(i)
            time.sleep(0.1)
    finally:
        os.kill(d.pid, signal.SIGCONT)
    r = c.wait(i)
    assert r.kind == ("timeout" if verdict == "timeout" else "cancelled"), r
    assert r.data["output"] == "printed before the end\n", r
    d.assert_no_leftovers()


# ------------------------------------------------------------------ the supply of workers

def wait_zygote(d, old=None, timeout=10.0 * SCALE):
    deadline = time.monotonic() + timeout
    while True:
        zs = [z[0] for z in d.zygotes() if z[2] != "Z" and z[0] != old]
        if zs:
            return zs[0]
        assert time.monotonic() < deadline, "no zygote came back: %r\n%s" % (
            d.children(), d.stderr[-2000:])
        time.sleep(0.02)


def no_worker_error(r):
    return (r.kind == "internal_error" and r.data.get("reason") == "workers cannot be started"
            and isinstance(r.data.get("retry_after_ms"), int))


def test_zygote_that_keeps_dying_is_restarted_with_backoff(daemon_factory):
    """The zygote killed eight times in a row, never delivering a worker:
    it is restarted each time (after a growing, logged back-off), an
    execution meanwhile gets a clear internal_error at once instead of
    hanging, and once a zygote delivers again executions work."""
    d = daemon_factory()
    c = d.client()
    z = wait_zygote(d)
    for _ in range(8):
        os.kill(z, signal.SIGKILL)
        if _ < 7:
            z = wait_zygote(d, old=z)
    d.wait_log(r"the zygote died \(signal 9[^\n]*next attempt in [1-9]\d* ms \(8 failures")
    # at once: answered with the error (an execution that waited for a worker
    # would end in a worker or a timeout), before the next attempt
    r = c.execute("return 1", timeout=SAFETY_NET)
    if r.ok:    # a probe of the supply, made before the last death, was pooled: used up now
        r = c.execute("return 1", timeout=SAFETY_NET)
    assert no_worker_error(r), r
    assert "workers cannot be started" in r.message, r
    deadline = time.monotonic() + 15 * SCALE
    while True:
        r = c.execute("return 'back'", timeout=10 * SCALE)
        if r.ok:
            break
        assert no_worker_error(r), r
        assert time.monotonic() < deadline, "executions never worked again: %r" % r
        time.sleep(0.2)
    assert r.result["value"] == "back"
    d.wait_log("workers start again")
    wait_zygote(d)
    d.assert_no_leftovers()


def test_execution_waiting_for_a_worker_has_a_clock(daemon_factory):
    """An execution admitted while the zygote is stopped (it answers no
    spawn request) is answered `timeout` when its timeout_ms passes; the
    stuck zygote is killed and replaced, and executions work again."""
    d = daemon_factory()
    c = d.client()
    z = wait_zygote(d)
    os.kill(z, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        r = c.execute("return 1", timeout_ms=500, timeout=SAFETY_NET)
        assert r.kind == "timeout" and r.data.get("reason") == "waiting for a worker", r
        assert time.monotonic() - t0 > 0.4, "answered before its timeout_ms"
        d.wait_log(r"zygote %d answered no spawn request" % z)
    finally:
        try:
            os.kill(z, signal.SIGCONT)
        except OSError:
            pass
    deadline = time.monotonic() + 10 * SCALE
    while True:
        r = c.execute("return 2", timeout=10 * SCALE)
        if r.ok:
            break
        assert no_worker_error(r) or r.kind == "timeout", r
        assert time.monotonic() < deadline, r
    assert wait_zygote(d) != z
    d.assert_no_leftovers()


def test_out_of_descriptors_no_spawn_storm(daemon_factory):
    """A daemon under RLIMIT_NOFILE 64 whose descriptors are all taken by
    client connections cannot receive a worker's channel.  It backs off
    (a bounded number of attempts and log lines, not thousands a second),
    and executions that cannot get a worker are answered internal_error
    ("workers cannot be started"), never `cancelled`, and never hang."""
    import resource
    d = daemon_factory(daemon={"pool_size": 2, "max_connections": 1000},
                       rlimits={resource.RLIMIT_NOFILE: (64, 64)})
    c = d.client()
    c.ping()
    d.wait_for_workers(2)
    used = len(os.listdir("/proc/%d/fd" % d.pid))
    extra = [d.client(timeout=2) for _ in range(64 - used + 4)]
    for x in extra[:64 - used - 2]:
        x.ping()                    # accepted: the descriptors are gone
    t0 = time.monotonic()
    kinds = []
    while time.monotonic() - t0 < 3 * SCALE:
        r = c.execute("return 1", timeout=10 * SCALE)
        kinds.append("ok" if r.ok else r.kind)
        assert r.ok or no_worker_error(r), r
    lines = len([l for l in d.stderr.splitlines()
                 if "could not start a worker" in l or "no descriptor for a" in l])
    assert "internal_error" in kinds, kinds
    assert lines <= 30, "%d spawn failure lines in 3 s:\n%s" % (lines, d.stderr[-2000:])
    for x in extra:
        x.close()
    deadline = time.monotonic() + 15 * SCALE
    while not c.execute("return 1", timeout=10 * SCALE).ok:
        assert time.monotonic() < deadline, "executions never worked again"
        time.sleep(0.2)


def test_out_of_descriptors_accept_warning_is_rate_limited(daemon_factory):
    """While the daemon is out of descriptors, accept pauses every 100 ms;
    its warning is logged once, then at most every 10 s with the count of
    pauses not logged (it was one line per pause: 864,000 a day), and one
    notice says when connections are taken again.  The waiting clients are
    served then."""
    import resource
    d = daemon_factory(daemon={"pool_size": 0, "max_connections": 1000},
                       rlimits={resource.RLIMIT_NOFILE: (48, 48)})
    c = d.client()
    c.ping()
    used = len(os.listdir("/proc/%d/fd" % d.pid))
    held = [d.client(timeout=2) for _ in range(48 - used)]
    for x in held:
        x.ping()
    waiting = [d.client(timeout=30 * SCALE) for _ in range(3)]    # in the listen backlog
    d.wait_log(r"accept: Too many open files; pausing for 100 ms")
    time.sleep(3)
    lines = [l for l in d.stderr.splitlines() if "accept: Too many open files" in l]
    assert len(lines) == 1, "%d accept warnings in 3 s:\n%s" % (len(lines), "\n".join(lines[:5]))
    assert "(1 pauses in a row, 0 not logged since the last report)" in lines[0], lines[0]
    for x in held[:8]:
        x.close()
    for x in waiting:
        x.ping()
    m = d.wait_log(r"accept: connections are taken again \(after (\d+) pauses for want of "
                   r"descriptors\)")
    # about 30 in the 3 s, but a starved daemon's timer comes late: what
    # holds at any load is that the pauses went on
    assert int(m.group(1)) >= 2, m.group(0)
    c.ping()


# ------------------------------------------------------------------ the warm pool's liveness

def stop_and_wait(pids, timeout=3.0 * SCALE):
    """SIGSTOP each pid and wait until the kernel shows it stopped."""
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not all((read_proc_stat(p) or ("", "T"))[1] == "T" for p in pids):
        assert time.monotonic() < deadline, [read_proc_stat(p) for p in pids]
        time.sleep(0.005)


def test_stopped_pool_workers_are_never_handed_a_job(daemon_factory):
    """Both pooled workers SIGSTOPped: the next execution does not wait for
    them until its timeout; they are killed and replaced."""
    d = daemon_factory(daemon={"pool_size": 2})
    c = d.client()
    c.ping()
    pool = d.wait_for_workers(2)
    stop_and_wait(pool)
    r = c.execute("return 'fresh'", timeout_ms=3000 * SCALE, timeout=10 * SCALE)
    assert r.ok and r.result["value"] == "fresh", r
    wait_gone(pool)
    d.wait_log(r"pooled worker (%d|%d) (is stopped or dead|was stopped); replacing it"
               % tuple(pool))
    d.assert_no_leftovers(allowed_idle=2)


def test_stopped_pool_worker_is_replaced_without_a_job(daemon_factory):
    """A pooled worker stopped while no job comes is found by the periodic
    check (within POOL_CHECK_INTERVAL, 1 s) and replaced."""
    d = daemon_factory(daemon={"pool_size": 2})
    d.client().ping()
    pool = d.wait_for_workers(2)
    stop_and_wait(pool[:1])
    wait_gone([pool[0]], timeout=3.0 * SCALE)
    fresh = d.wait_for_workers(2)
    assert pool[0] not in fresh and pool[1] in fresh, (pool, fresh)


# ------------------------------------------------------------------ stats.cpu_us is measured, not claimed

FORGED_CPU_US = 987654321000


def forge_result_from_worker(pid, payload, before_detach):
    """pid is blocked in read(2) waiting for its tool answer: stop it, run
    before_detach() (the test answers the tool call, so the execution is
    RUNNING again), then make the restarted read a write(2) of a RESULT
    frame carrying payload, as a compromised worker would send it."""
    import ctypes
    import struct
    from test_containment import (ORIG_RAX, RAX, ERESTARTSYS, PTRACE_GETREGS,
                                  PTRACE_SETREGS, UserRegs, stopped_in_read)
    RSP, RDX, RSI = 19, 12, 13
    PTRACE_POKEDATA, SYS_WRITE, CHAN_RESULT = 5, 1, 18
    with stopped_in_read(pid) as libc:
        before_detach()
        regs = UserRegs()
        assert libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) == 0
        assert regs.r[ORIG_RAX] == 0 and ctypes.c_long(regs.r[RAX]).value == -ERESTARTSYS
        frame = struct.pack("<II", CHAN_RESULT, len(payload)) + payload
        frame += b"\0" * (-len(frame) % 8)
        with open("/proc/%d/maps" % pid) as f:
            stack = [l.split()[0] for l in f if l.rstrip().endswith("[stack]")][0]
        lo = int(stack.split("-")[0], 16)
        addr = (regs.r[RSP] - 16384) & ~15        # unused stack below the live frames
        assert addr >= lo, "stack too small to hold the frame"
        for off in range(0, len(frame), 8):
            word = struct.unpack("<q", frame[off:off + 8])[0]
            assert libc.ptrace(PTRACE_POKEDATA, pid, ctypes.c_void_p(addr + off),
                               ctypes.c_void_p(word)) == 0, os.strerror(ctypes.get_errno())
        regs.r[ORIG_RAX] = SYS_WRITE
        regs.r[RSI] = addr
        regs.r[RDX] = 8 + len(payload)
        assert libc.ptrace(PTRACE_SETREGS, pid, None, ctypes.byref(regs)) == 0


@pytest.mark.skipif(not IS_ROOT, reason="needs root (ptrace of a worker under another uid)")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 register layout")
def test_cpu_us_is_the_supervisors_measurement(daemon_factory):
    """A compromised worker's result claims cpu_us 987654321000 (11 days):
    stats.cpu_us is what the kernel counted for the process, measured by the
    supervisor (and the worker's own figures count only for what only it can
    see: reductions, heap peak)."""
    import json
    d = daemon_factory()
    c = d.client()
    t0 = time.monotonic()
    i = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    pid = d.wait_for_workers(1)[0]
    payload = json.dumps({"value": 7, "bindings": [], "output_truncated": False,
                          "stats": {"cpu_us": FORGED_CPU_US, "reductions": 5,
                                    "heap_peak_bytes": 6}}).encode()

    def answer_tool():
        c.reply(call, 1)
        c.ping()                # the answer was taken: RUNNING again

    forge_result_from_worker(pid, payload, answer_tool)
    r = c.wait(i)
    elapsed_us = (time.monotonic() - t0) * 1e6
    assert r.ok and r.result["value"] == 7, r
    st = r.result["stats"]
    assert st["cpu_us"] != FORGED_CPU_US, st
    assert 0 < st["cpu_us"] <= elapsed_us, (st, elapsed_us)
    assert st["reductions"] == 5 and st["heap_peak_bytes"] == 6, st
    d.wait_log(r"outcome=ok wall_ms=\S+ cpu_ms=(?!987654321)")


@pytest.mark.skipif(not IS_ROOT, reason="needs root (worker chroot)")
def test_workers_failing_their_set_up_do_not_storm(daemon_factory, tmp_path):
    """The worker chroot removed after start-up: every new worker fails its
    set-up and dies.  Refilling the pool backs off (a bounded number of
    workers forked and log lines, not a fork loop), executions are answered
    internal_error, and once the directory is back workers start again."""
    empty = str(tmp_path / "empty")
    d = daemon_factory(daemon={"pool_size": 2},
                       worker={"user": "nobody", "group": "nogroup", "chroot": empty})
    c = d.client()
    assert c.value("return 1") == 1
    d.assert_no_leftovers(allowed_idle=2)      # only the pool is left
    pool = d.wait_for_workers(2)
    os.rmdir(empty)
    for p in pool:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_gone(pool)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 * SCALE:
        r = c.execute("return 1", timeout=10 * SCALE)
        assert not r.ok and r.kind == "internal_error", r
        time.sleep(0.05)
    st = c.call("describe").result["state"]
    assert st["workers_started"] < 60, st
    lines = len([l for l in d.stderr.splitlines() if "died before its job" in l])
    assert lines < 30, d.stderr[-2000:]
    os.mkdir(empty, 0o555)
    deadline = time.monotonic() + 15 * SCALE
    while not c.execute("return 1", timeout=10 * SCALE).ok:
        assert time.monotonic() < deadline, "executions never worked again"
        time.sleep(0.2)
