"""Attacks on what the daemon sends while an execution runs
(docs/protocol.md §10): stream_output at the output cap and to a slow
reader, the answer backlog a streamed execution needs, and the strings
every tool/call and execution/output notification repeats (ids, modules),
played as a hostile chunk and a hostile client against the real daemon.
Each test states the attack and what must hold."""

import os
import time

import pytest

import sbx

T = {"name": "T", "functions": ["f", "g"]}


# ------------------------------------------------------------- stream_output

@pytest.mark.parametrize("cap", [1, 7, 8, 65535, 65536, 65537])
def test_stream_at_the_output_cap_with_invalid_utf8(client, cap):
    code = ("for i = 1, 40 do io = nil print(('\\xff\\xe2\\x82'):rep(700) .. '\\u{20ac}x') end "
            "print(('y'):rep(70000)) return 1")
    r = client.execute(code, limits={"max_output_bytes": cap}, stream_output=True)
    assert r.ok, r
    out = r.result["output"]
    assert r.result["output_truncated"] is True
    assert "".join(client.output_notes(r.id)) == out
    assert len(out.encode("utf-8", "surrogatepass")) <= cap * 3


def test_stream_prints_between_tool_calls_in_order(client):
    code = "for i = 1, 5 do print('p' .. i) T.f(i) end print('end') return 1"
    order = []

    def f(args):
        order.append(("call", args[0], "".join(client.output_notes(i))))
        return 0
    i = client.send_execute(code, tools=[T], handlers={"T.f": f}, stream_output=True)
    r = client.wait(i)
    assert r.ok, r
    for n, (_, k, seen) in enumerate(order, 1):
        assert seen == "".join("p%d\n" % m for m in range(1, n + 1)), order
    assert "".join(client.output_notes(i)) == r.result["output"]


def test_stream_cancel_mid_stream_with_slow_reader(daemon):
    c = daemon.client()
    i = c.send_execute("while true do print(('z'):rep(1000)) end", stream_output=True,
                       limits={"max_output_bytes": 8 << 20})
    time.sleep(0.5 * sbx.SCALE)       # reading nothing meanwhile
    c.cancel(i)
    r = c.wait(i, timeout=20 * sbx.SCALE)
    assert r.kind == "cancelled", r
    assert "".join(c.output_notes(i)) == r.data["output"]
    c.ping()
    c.close()
    daemon.assert_no_leftovers()


# ------------------------------------------------ the answer backlog, streamed

def test_streamed_answer_fits_the_least_backlog(daemon_factory):
    # max_backlog_bytes at the least the config accepts for these ceilings:
    # one streamed execution's notifications and its answer together (1 MiB
    # of control bytes, escaped six-fold, twice) must reach a client that
    # reads them a moment later, not close its connection
    m = 1 << 20
    least = m + m + 12 * m + 2 * m
    d = daemon_factory(daemon={"max_message_bytes": m, "max_backlog_bytes": least},
                       ceilings={"max_output_bytes": m, "max_bindings_bytes": m},
                       defaults={"max_output_bytes": m, "max_bindings_bytes": m})
    c = d.client(timeout=30 * sbx.SCALE)
    i = c.send_execute("print(('\\1'):rep(%d)) return 1" % (m - 1), stream_output=True)
    d.wait_log(r"outcome=ok")
    time.sleep(0.2)                     # the answer is queued behind the notifications
    r = c.wait(i)
    assert r.ok and len(r.result["output"]) == m, r
    assert "".join(c.output_notes(i)) == r.result["output"]
    assert "closing the connection" not in d.stderr
    c.close()


def test_backlog_below_the_streamed_answer_is_refused(daemon_factory):
    m = 1 << 20
    d = daemon_factory(start=False, check_stop=False, daemon={"max_message_bytes": m,
                                            "max_backlog_bytes": m + m + 6 * m + 2 * m},
                       ceilings={"max_output_bytes": m, "max_bindings_bytes": m},
                       defaults={"max_output_bytes": m, "max_bindings_bytes": m})
    with pytest.raises(pytest.fail.Exception):
        d.start(ready_timeout=sbx.SAFETY_NET)
    assert "12 x max_output_bytes" in d.stderr, d.stderr


def supervisor_cpu(d):
    """The daemon's own CPU time so far, in seconds (not its workers')."""
    return sbx_stat(d.pid) / os.sysconf("SC_CLK_TCK")


def sbx_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def test_strings_the_daemon_repeats_are_bounded(daemon_factory):
    """Every tool/call (and execution/output) repeats its execution's id and
    its tool's module: an 8 MiB id with 40 tool calls cost the supervisor
    3.5 s of CPU while other clients waited.  A string id over 1024 bytes
    (RPC_ID_MAX), a module over 1024 bytes and a params.session over 1024
    bytes are refused with invalid_params (the refusal carries the id once),
    before anything runs; at exactly 1024 bytes each works, 40 tool calls
    and streamed output each carrying them."""
    d = daemon_factory(daemon={"max_message_bytes": 16 << 20})
    c = d.client(timeout=60 * sbx.SCALE)
    code = "for i = 1, 40 do T.f(i) end print('x') return 1"
    calls = []

    def tool(t, module):
        return [{"name": "T", "module": module, "functions": ["f"]}]
    # the legitimate neighbour: 1024-byte id and module
    id_ok, mod_ok = "i" * 1024, "M" * 1024
    i = c.send_execute(code, tools=tool("T", mod_ok), id=id_ok, stream_output=True,
                       handlers={"T.f": lambda a: calls.append(a) or 0})
    r = c.wait(i)
    assert r.ok and r.id == id_ok, r
    assert len(calls) == 40
    assert all(tc.execution_id == id_ok and tc.module == mod_ok for tc in c.tool_calls)
    assert "".join(c.output_notes(id_ok)) == "x\n"
    # one byte more, and the 8 MiB id: refused before any tool call
    n = len(c.tool_calls)
    for big in ("i" * 1025, "j" * (8 << 20)):
        cpu0 = supervisor_cpu(d)
        r = c.wait(c.send_execute(code, tools=tool("T", mod_ok), id=big,
                                  handlers={"T.f": lambda a: 0}))
        print("id of %d bytes refused: %.3f s of supervisor CPU" % (len(big), supervisor_cpu(d) - cpu0))
        assert r.kind == "invalid_params" and r.id == big, r.kind
        assert r.data["max_id_bytes"] == 1024 and "1024" in r.message, r.message
    r = c.execute(code, tools=tool("T", "M" * 1025), handlers={"T.f": lambda a: 0})
    assert r.kind == "invalid_params" and "module must be a string of at most 1024" in r.message, r
    r = c.execute(code, tools=tool("T", "M" * (8 << 20)), handlers={"T.f": lambda a: 0})
    assert r.kind == "invalid_params", r.kind
    assert len(c.tool_calls) == n
    for method in ("session/snapshot", "session/close"):
        r = c.call(method, {"session": "s" * 1025})
        assert r.kind == "invalid_params" and "at most 1024 bytes" in r.message, r
        r = c.call(method, {"session": "s" * 1024})
        assert r.kind == "session_not_found", r
    r = c.execute("return 1", session="s" * 1025)
    assert r.kind == "invalid_params", r
    c.ping()
