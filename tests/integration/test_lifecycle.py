"""Time, cancellation, disconnects, worker deaths, queueing and concurrency."""

import os
import signal
import threading
import time

import pytest

import sbx
from sbx import NO_REPLY
from conftest import ZYGOTES, timed_out_past

T = [{"name": "T", "functions": ["ready", "wait", "f"]}]


def start_looping(c, daemon, code="print('pre') T.ready() while true do end", **kw):
    """Start an execution that is surely running inside the worker: it has made
    a tool call (answered) and then spins.  Returns the request id."""
    n = len(c.tool_calls)
    kw.setdefault("timeout_ms", 60000 * sbx.SCALE)
    i = c.send_execute(code, tools=T, handlers={"T.ready": lambda a: True}, **kw)
    c.wait_tool_call(n + 1)
    time.sleep(0.1)
    return i


# ------------------------------------------------------------------ timeout

def test_timeout(client, daemon):
    t0 = time.monotonic()
    r, ms = timed_out_past(client, "print('before loop') T.ready() while true do end",
                           tools=T, handlers={"T.ready": lambda a: True})
    elapsed = time.monotonic() - t0
    assert r.code == -32003 and r.kind == "timeout", r
    assert "before loop" in (r.data.get("output") or ""), r
    assert isinstance(r.data.get("stats"), dict), r
    assert elapsed >= ms / 1000 - 0.05, "timed out too early: %.3fs of %d ms" % (elapsed, ms)
    daemon.assert_no_leftovers()
    client.ping()


def test_timeout_counts_tool_wait(client, daemon):
    r, _ = timed_out_past(client, "print('asking') return T.wait()", tools=T,
                          handlers={"T.wait": lambda a: NO_REPLY})
    assert r.code == -32003 and r.kind == "timeout", r
    assert "asking" in (r.data.get("output") or "")
    # a late answer to the dead execution's tool call is ignored
    client.reply(client.deferred[-1], 1)
    client.assert_quiet_until_ping()
    daemon.assert_no_leftovers()


def test_timeout_in_pcall_not_catchable(client, daemon):
    r, _ = timed_out_past(client, "local ok = pcall(function() T.ready() while true do end end)"
                          " return 'escaped'", tools=T, handlers={"T.ready": lambda a: True})
    assert r.code == -32003, r
    daemon.assert_no_leftovers()


def test_fast_execution_not_timed_out(client):
    assert client.value("return 1", timeout_ms=5000 * sbx.SCALE) == 1


# ------------------------------------------------------------------ cancel

def test_cancel_running(client, daemon):
    i = start_looping(client, daemon)
    assert daemon.worker_pids(), "no worker while executing"
    client.cancel(i)
    r = client.wait(i)
    assert r.code == -32800 and r.kind == "cancelled", r
    assert "pre" in (r.data.get("output") or ""), r
    daemon.assert_no_leftovers()
    client.ping()


def test_cancel_string_id(client, daemon):
    i = start_looping(client, daemon, id="exec-to-cancel")
    client.cancel("exec-to-cancel")
    r = client.wait(i)
    assert r.code == -32800 and r.kind == "cancelled", r
    daemon.assert_no_leftovers()


def test_cancel_while_waiting_for_tool(client, daemon):
    i = client.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    client.cancel(i)
    r = client.wait(i)
    assert r.code == -32800 and r.kind == "cancelled", r
    client.reply(call, 5)          # too late: ignored
    client.assert_quiet_until_ping()
    daemon.assert_no_leftovers()


def test_cancel_only_the_named_execution(client, daemon):
    a = client.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    b = client.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    client.wait_deferred(2)
    client.cancel(a)
    ra = client.wait(a)
    assert ra.code == -32800, ra
    cb = [c for c in client.deferred if c.execution_id == b][0]
    client.reply(cb, "b-done")
    rb = client.wait(b)
    assert rb.ok and rb.result["value"] == "b-done", rb
    daemon.assert_no_leftovers()


def test_cancel_from_other_connection_has_no_effect(daemon, client):
    i = client.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    with daemon.client() as other:
        other.cancel(i)
        other.ping()
    client.reply(call, "fine")
    r = client.wait(i)
    assert r.ok and r.result["value"] == "fine", r


# ------------------------------------------------------------------ disconnect

def test_disconnect_kills_running_worker(daemon):
    c = daemon.client()
    start_looping(c, daemon)
    assert daemon.worker_pids()
    c.close()
    daemon.assert_no_leftovers()
    daemon.assert_alive()


def test_disconnect_while_waiting_for_tool(daemon):
    c = daemon.client()
    for _ in range(3):
        c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    c.wait_deferred(3)
    c.close()
    daemon.assert_no_leftovers()
    daemon.assert_alive()


def test_half_close_with_pending_execution(daemon):
    c = daemon.client()
    i = c.send_execute("return 6 * 7")
    c.sock.shutdown(1)   # SHUT_WR: no more requests, but we still read
    try:
        r = c.wait(i)
        assert r.ok and r.result["value"] == 42, r
    except sbx.ConnectionClosed:
        pass             # cancelling on EOF is allowed too
    c.close()
    daemon.assert_no_leftovers()
    daemon.assert_alive()


# ------------------------------------------------------------------ worker deaths

@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_worker_killed_is_crashed(client, daemon, sig):
    daemon.assert_no_leftovers()
    i = start_looping(client, daemon)
    pids = daemon.worker_pids()
    assert len(pids) == 1, "expected exactly one worker, have %r" % daemon.children()
    os.kill(pids[0], sig)
    r = client.wait(i)
    assert r.code == -32007 and r.kind == "crashed", r
    assert "pre" in (r.data.get("output") or ""), r
    daemon.assert_no_leftovers()
    assert client.value("return 'still fine'") == "still fine"


def test_zygote_restarted(client, daemon):
    zs = daemon.zygotes()
    assert len(zs) == ZYGOTES, "expected %d sandboxd-zygote children, have %r" % (
        ZYGOTES, daemon.children())
    os.kill(zs[0][0], signal.SIGKILL)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        r = client.execute("return 'back'")
        if r.ok:
            assert r.result["value"] == "back"
            break
        assert r.kind in ("internal_error", "crashed", "busy"), r
        assert time.monotonic() < deadline, "no working execution after the zygote died: %r" % r
        time.sleep(0.1)
    zs2 = daemon.zygotes()
    assert len(zs2) == ZYGOTES and zs[0][0] not in [z[0] for z in zs2], daemon.children()
    daemon.assert_no_leftovers()


# ------------------------------------------------------------------ queue and busy

def test_busy_no_queue(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 0})
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    r = c.execute("return 'b'")
    assert r.code == -32009 and r.kind == "busy", r
    with d.client() as other:
        r = other.execute("return 'c'")
        assert r.code == -32009 and r.kind == "busy", r
        other.ping()     # cheap methods still work
    c.reply(call, "a")
    ra = c.wait(a)
    assert ra.ok and ra.result["value"] == "a", ra
    d.assert_no_leftovers()
    assert c.value("return 'after'") == "after"


def test_busy_queue_of_one(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 1})
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    b = c.send_execute("return 'b'")          # queued
    r = c.execute("return 'c'")               # queue full
    assert r.code == -32009 and r.kind == "busy", r
    c.reply(call, "a")
    ra, rb = c.wait(a), c.wait(b)
    assert ra.ok and ra.result["value"] == "a", ra
    assert rb.ok and rb.result["value"] == "b", rb
    d.assert_no_leftovers()


def test_cancel_queued_execution(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 2})
    c = d.client()
    a = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    b = c.send_execute("return 'b'")
    c.cancel(b)
    rb = c.wait(b)
    assert rb.code == -32800 and rb.kind == "cancelled", rb
    c.reply(call, "a")
    assert c.wait(a).result["value"] == "a"
    d.assert_no_leftovers()


def test_queue_drains_in_order(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 8})
    c = d.client()
    ids = [c.send_execute("return T.f(%d)" % n, tools=T, handlers={"T.f": lambda a: a[0] * 2})
           for n in range(6)]
    for n, i in enumerate(ids):
        r = c.wait(i)
        assert r.ok and r.result["value"] == n * 2, r
    d.assert_no_leftovers()


def test_disconnect_with_queued_executions(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 4})
    c = d.client()
    c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    c.wait_deferred(1)
    for _ in range(3):
        c.send_execute("while true do end")
    c.close()
    d.assert_no_leftovers()
    with d.client() as c2:
        assert c2.value("return 1") == 1


def test_warm_pool(daemon_factory):
    d = daemon_factory(daemon={"pool_size": 2, "max_workers": 4})
    c = d.client()
    for n in range(5):
        assert c.value("return %d" % n) == n
    i = start_looping(c, d)
    c.cancel(i)
    assert c.wait(i).code == -32800
    d.assert_no_leftovers(allowed_idle=2)
    # a warm worker never runs a second job: bindings and globals do not leak
    c.exec_ok("leaked = 'secret'; string.leak = 1")
    assert c.value("return leaked, string.leak") == [None, None]


# ------------------------------------------------------------------ concurrency

def test_many_connections(daemon):
    errors = []

    def worker(k):
        try:
            with daemon.client() as c:
                ids = {}
                for j in range(5):
                    n = k * 100 + j
                    i = c.send_execute("print(%d) local x = T.f(%d) return x + 1" % (n, n), tools=T,
                                       handlers={"T.f": lambda a: a[0] * 2})
                    ids[i] = n
                for i, n in ids.items():
                    r = c.wait(i, timeout=60 * sbx.SCALE)
                    if not (r.ok and r.result["value"] == n * 2 + 1 and r.result["output"] == "%d\n" % n):
                        errors.append((k, n, r))
                    for call in c.tool_calls:
                        if call.args[0] // 100 != k:
                            errors.append(("tool call routed to the wrong connection", k, call))
        except Exception as e:   # noqa: BLE001
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * sbx.SCALE)
    assert not any(t.is_alive() for t in threads), "client threads hung"
    assert not errors, errors[:5]
    daemon.assert_no_leftovers()
    daemon.assert_alive()


def test_many_in_flight_one_connection(client):
    ids = [client.send_execute("return %d" % n) for n in range(30)]
    res = client.wait_all(ids)
    assert [res[i].result["value"] for i in ids] == list(range(30))
