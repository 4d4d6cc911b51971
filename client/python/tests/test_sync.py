"""The blocking Client against the real daemon."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import sandboxd
from conftest import PKG, SCALE


def test_execute_and_methods(sock):
    with sandboxd.Client(sock) as c:
        r = c.execute("n = W.get('Paris').temp print(n) return n",
                      tools={"W": {"get": lambda city: {"temp": 21.5, "city": city}}})
        assert r.value == 21.5 and r.output == "21.5\n" and r.binding_names == ["n"]
        assert r.stats["tool_calls"] == 1
        assert c.execute("return n * 2", bindings=r.bindings).value == 43.0
        assert c.ping() == {}
        assert c.binding_names(r.bindings) == ["n"]
        c.check("return 1")
        with pytest.raises(sandboxd.LuaError) as ei:
            c.check("return 1 +")
        assert ei.value.kind == "syntax_error" and ei.value.line == 1


def test_tools_run_in_the_calling_thread(sock):
    me = threading.get_ident()
    seen = []
    with sandboxd.Client(sock) as c:
        c.execute("T.f() T.f()", tools={"T": {"f": lambda: seen.append(threading.get_ident())}})
    assert seen == [me, me]


def test_lines_over_64k_both_ways(sock):
    with sandboxd.Client(sock) as c:
        r = c.execute("return #T.echo(string.rep('x', 150000))",
                      tools={"T": {"echo": lambda s: s * 2}})
        assert r.value == 300000
        assert c.execute("return string.rep('y', 250000)").value == "y" * 250000


def test_oversized_tool_result_is_catchable(sock):
    """A tool answer over max_message_bytes is a Lua error the chunk catches,
    not a call left waiting: that would end the execution with `timeout`
    (its timeout_ms, the ceiling, is only a safety net)."""
    with sandboxd.Client(sock) as c:
        r = c.execute("return pcall(T.big)", tools={"T": {"big": lambda: ["x" * 1000] * 2000}},
                      timeout_ms=30000 * SCALE)
        assert r.value[0] is False and "exceeds the daemon's message limit" in r.value[1]


def test_threads_share_one_client(sock):
    """Several threads, each with its own execution and tool calls, on one
    connection: answers reach the thread that waits for them."""
    results, errors = {}, []
    with sandboxd.Client(sock) as c:
        def work(i):
            try:
                def f(j):
                    time.sleep(0.002 * ((i + j) % 3))
                    return i * 10 + j
                for _ in range(3):
                    r = c.execute("local s = 0 for j = 1, 4 do s = s + T.f(j) end return s",
                                  tools={"T": {"f": f}})
                    assert results.setdefault(i, r.value) == r.value
                    assert c.execute("return %d" % i).value == i
            except Exception as e:          # pragma: no cover - reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert not errors
        assert results == {i: i * 40 + 10 for i in range(8)}
        assert c.ping() == {}


def test_tool_threads_pool(sock):
    with sandboxd.Client(sock, tool_threads=4) as c:
        names = []
        r = c.execute("return T.f(1) + T.f(2)",
                      tools={"T": {"f": lambda x: names.append(threading.current_thread().name)
                                   or x}})
        assert r.value == 3 and all(n.startswith("sandboxd-tool") for n in names)


def test_async_tool_in_the_blocking_client(sock):
    async def f(x):
        return x + 1
    with sandboxd.Client(sock) as c:
        assert c.execute("return T.f(1)", tools={"T": {"f": f}}).value == 2


# Ctrl-C is tested in a child process that sets its own SIGINT disposition:
# a test process may have been started with SIGINT ignored (nohup, a shell's
# background job, some CI runners), and Python then leaves it ignored.  The
# child is started with it ignored on purpose, so that the case is run here.
CTRL_C_CHILD = r"""
import signal, sys, time
sys.path.insert(0, sys.argv[1])
import sandboxd
signal.signal(signal.SIGINT, signal.default_int_handler)
sock, mode, scale = sys.argv[2], sys.argv[3], int(sys.argv[4])

def say(what):
    print(what, flush=True)

def tool():
    if mode == "tool":
        say("in the tool")
        time.sleep(60 * scale)
    else:
        say("running")          # the chunk runs: the loop comes after this answer

with sandboxd.Client(sock) as c:
    t0 = time.monotonic()
    try:
        if mode == "stream":    # a LiveOutput's loop: the same
            for text in c.stream("print('x') T.f() while true do end", tools={"T": {"f": tool}},
                                 timeout_ms=60000 * scale):
                pass
        else:
            c.execute("T.f() while true do end", tools={"T": {"f": tool}},
                      timeout_ms=60000 * scale)
        say("not interrupted")
    except KeyboardInterrupt:
        say("KeyboardInterrupt after %.1f s" % (time.monotonic() - t0))
    for _ in range(100 * scale):
        try:
            say("next: %r" % c.execute("return 2").value)
            break
        except sandboxd.Busy:       # the one worker is not back yet
            time.sleep(0.05)
    else:
        say("the execution was not cancelled")
"""


RECVFROM = {"x86_64": "45", "aarch64": "207"}.get(os.uname().machine)


def blocked_in_recv(pid):
    """Is pid's main thread blocked in recvfrom(2), the client's wait for the daemon?"""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] == RECVFROM
    except (OSError, IndexError):
        return False


def ctrl_c(d, mode):
    """Run CTRL_C_CHILD against d, send it SIGINT once it waits (mode "wait":
    for the execution, in recv; "stream": the same in a LiveOutput's loop;
    "tool": in its tool), return its output."""
    p = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, PKG, d.socket_path, mode,
                          str(SCALE)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        first = p.stdout.readline()
        assert first == ("in the tool\n" if mode == "tool" else "running\n"), first
        if mode in ("wait", "stream"):
            deadline = time.monotonic() + 60 * SCALE     # a safety net
            while not blocked_in_recv(p.pid):
                assert time.monotonic() < deadline, "the client never waited in recv"
                time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60 * SCALE)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return first + out


@pytest.mark.parametrize("how", ["wait", "stream"])
def test_ctrl_c_cancels_execute(daemon_factory, how):
    """KeyboardInterrupt while execute waits, or in a blocking LiveOutput's
    loop: the daemon is told (one worker, no queue: the next execute gets
    the worker), and KeyboardInterrupt propagates, at once."""
    if RECVFROM is None:
        pytest.skip("recvfrom's number on %s is not known here" % os.uname().machine)
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0, "pool_size": 1,
                               "log_level": "info"})
    out = ctrl_c(d, how).splitlines()
    assert out[1].startswith("KeyboardInterrupt after "), out
    assert out[2:] == ["next: 2"], out
    # at once: the chunk, which never ends, was cancelled by the client
    # while it ran, not ended by its timeout_ms (a minute)
    assert re.search(r" seq=1 id=\S+ op=execute outcome=cancelled ", d.stderr), d.log


def test_ctrl_c_in_a_tool_cancels_execute(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0, "pool_size": 1})
    out = ctrl_c(d, "tool").splitlines()
    assert out[1].startswith("KeyboardInterrupt after "), out
    assert out[2:] == ["next: 2"], out


def test_daemon_restarted_mid_execution(daemon_factory):
    d = daemon_factory()
    c = sandboxd.Client(d.socket_path)
    def tool():
        d.kill()
        return 1
    with pytest.raises(sandboxd.DaemonUnavailable):
        c.execute("return T.f()", tools={"T": {"f": tool}})
    with pytest.raises(sandboxd.DaemonUnavailable):
        c.ping()
    d.start()
    assert c.execute("return 'back'").value == "back"
    c.close()


def test_system_exit_in_a_tool_ends_the_execution(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0, "pool_size": 1})
    with sandboxd.Client(d.socket_path) as c:
        def bye():
            raise SystemExit(3)
        with pytest.raises(SystemExit):
            c.execute("return T.f()", tools={"T": {"f": bye}}, timeout_ms=30000)
        for _ in range(100):
            try:
                assert c.execute("return 1").value == 1
                break
            except sandboxd.Busy:
                time.sleep(0.05)
        else:
            pytest.fail("SystemExit in a tool left the execution running")
