"""Live output (docs/protocol.md §10): execute with stream_output sends
execution/output notifications while the chunk runs, coalesced, in order,
within max_output_bytes; the result still carries the whole output."""

import time

import sbx
from sbx import NO_REPLY
from conftest import timed_out_past

T = {"name": "T", "functions": ["f"]}


def notes_of(client, i):
    return client.output_notes(i)


def test_stream_arrives_before_the_chunk_ends(client):
    # the tool call is held until the notification for the first print is
    # here: the output arrived while the chunk was still running
    i = client.send_execute("print('first') local v = T.f() print('second', v) return v",
                            tools=[T], handlers={"T.f": lambda a: NO_REPLY}, stream_output=True)
    call = client.wait_deferred(1)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while notes_of(client, i) != ["first\n"] and time.monotonic() < deadline:
        client.pump(0.1)
    assert notes_of(client, i) == ["first\n"]
    # the notification came before the tool call that followed the print
    kinds = [k for k, m in client.log if k != "response"]
    assert kinds.index("other") < kinds.index("tool_call")
    client.reply(call, result=7)
    r = client.wait(i)
    assert r.ok, r
    assert r.result["output"] == "first\nsecond\t7\n"
    assert "".join(notes_of(client, i)) == r.result["output"]
    # every notification of this execution came before its answer
    last_note = max(n for n, (k, m) in enumerate(client.log)
                    if k == "other" and m["params"]["execution_id"] == i)
    answer = [n for n, (k, m) in enumerate(client.log) if k == "response" and m["id"] == i][0]
    assert last_note < answer


def test_stream_live_without_tools(client):
    # the chunk runs on until it is cancelled (its limits are the
    # ceilings: seconds of CPU at the least), so its answer cannot come
    # before the output however slowly a loaded machine lets the test read
    i = client.send_execute("print('early') while true do end", stream_output=True,
                            limits={"max_reductions": 4000000000, "cpu_ms": 60000 * sbx.SCALE},
                            timeout_ms=120000 * sbx.SCALE)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while not notes_of(client, i) and time.monotonic() < deadline:
        client.pump(0.05)
    assert notes_of(client, i) == ["early\n"]
    assert client.arrivals == [], "the answer came before the live output"
    client.cancel(i)
    r = client.wait(i)
    assert r.kind == "cancelled" and r.data["output"] == "early\n", r


def test_stream_coalesces_prints(client):
    r = client.execute("for i = 1, 2000 do print(i) end return 'done'", stream_output=True)
    assert r.ok, r
    notes = notes_of(client, r.id)
    assert "".join(notes) == r.result["output"]
    assert r.result["output"].count("\n") == 2000
    assert 1 <= len(notes) < 200, len(notes)


def test_stream_bounded_by_max_output_bytes(client):
    r = client.execute("for i = 1, 100 do print(string.rep('x', 99)) end return 1",
                       limits={"max_output_bytes": 250}, stream_output=True)
    assert r.ok, r
    assert r.result["output_truncated"] is True
    assert len(r.result["output"]) == 250
    assert "".join(notes_of(client, r.id)) == r.result["output"]


def test_stream_never_splits_a_character(client):
    # 100,000 three-byte characters cross the 64 KiB frame bound mid-character
    r = client.execute("print(string.rep('\u20ac', 100000)) return 1", stream_output=True)
    assert r.ok, r
    notes = notes_of(client, r.id)
    assert "".join(notes) == r.result["output"] == "\u20ac" * 100000 + "\n"
    assert all("\ufffd" not in n for n in notes)


def test_stream_before_an_error(client):
    r = client.exec_err("print('a') print('b') error('boom')", kind="runtime_error",
                        stream_output=True)
    assert "".join(notes_of(client, r.id)) == r.data["output"] == "a\nb\n"


def test_stream_before_a_limit(client):
    r, _ = timed_out_past(client, "print('going') T.f() while true do end", tools=[T],
                          handlers={"T.f": lambda a: True}, stream_output=True)
    assert "".join(notes_of(client, r.id)) == r.data["output"] == "going\n"


def test_no_stream_unless_asked(client):
    r = client.execute("print('quiet') return 1")
    assert r.ok and r.result["output"] == "quiet\n"
    r = client.execute("print('quiet') return 1", stream_output=False)
    assert r.ok
    assert [m for m in client.others if m.get("method") == "execution/output"] == []


def test_stream_output_must_be_boolean(client):
    for bad in (1, "yes", [], {}):
        r = client.execute("return 1", stream_output=bad)
        assert r.kind == "invalid_params", (bad, r)


def test_stream_several_executions_apart(client):
    a = client.send_execute("for i = 1, 50 do print('A' .. i) end return 1", stream_output=True)
    b = client.send_execute("for i = 1, 50 do print('B' .. i) end return 2", stream_output=True)
    ra, rb = client.wait(a), client.wait(b)
    assert "".join(notes_of(client, a)) == ra.result["output"]
    assert "".join(notes_of(client, b)) == rb.result["output"]
    assert "B" not in ra.result["output"] and "A" not in rb.result["output"]


def test_describe_has_stream_output(client):
    assert "stream_output" in client.call("describe").result["features"]


def test_stream_coalesces_a_trickle(client):
    # a print every ~2 ms of CPU for about half a second: the notifications
    # follow the 20 ms coalescing window, not the prints.  Each window opens
    # at a print after the last notification and sends when it closes, so
    # the windows are at least 20 ms apart by the daemon's clock: at most
    # one per 20 ms of the execution's wall time, and the final one.  The
    # bound holds however little CPU the worker gets on a loaded machine
    # (its wall time grows with the bound); a notification per print would
    # break it wherever the loop takes under 5 s.
    r = client.execute("for i = 1, 250 do print(i) local t = os.clock() "
                       "while os.clock() - t < 0.002 do end end return 1",
                       stream_output=True, timeout_ms=60000 * sbx.SCALE)
    assert r.ok, r
    notes = notes_of(client, r.id)
    assert "".join(notes) == r.result["output"]
    windows = r.result["stats"]["wall_us"] // 20000
    assert len(notes) <= windows + 1, "%d notifications for 250 prints in %d us" % (
        len(notes), r.result["stats"]["wall_us"])
