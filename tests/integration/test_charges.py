"""The instruction budget's charges for work beyond VM instructions
(daemon/worker/charge.h; docs/protocol.md, "Limits"): what a chunk is
billed, and that a budget that pays for the work lets it run."""

import sbx


def test_string_bytes_charged(client):
    """A new string costs one reduction per 64 bytes of its length, whoever
    makes it (string.rep, `..`); under 1000 instructions the count hook adds
    nothing, so the reductions are the charges exactly."""
    r = client.exec_ok("local s = string.rep('x', 64000) .. 'y' return #s",
                       limits={"max_reductions": 100000})
    assert r["value"] == 64001
    assert r["stats"]["reductions"] == 1000 + 1000, r
    # strings shorter than 64 bytes cost nothing
    r = client.exec_ok("local n = 0 for i = 1, 100 do n = n + #('s' .. i) end return n",
                       limits={"max_reductions": 100000})
    assert r["stats"]["reductions"] == 0, r


def test_string_doubling_neighbour(client):
    """The neighbour of 246-string-concat-bytes: doubling a string to 1 MiB
    under a budget that pays for its bytes (2 MiB made in all, 32768
    reductions) completes."""
    r = client.exec_ok("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 40000})
    assert r["value"] == 1 << 20
    assert 32000 <= r["stats"]["reductions"] <= 33000, r
    r = client.execute("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 20000})
    assert r.kind == "reductions_limit", r


def test_tool_results_not_charged(client):
    """A tool's answer is the client's value, not the chunk's work: a long
    string from a tool costs nothing."""
    big = "z" * 200000
    r = client.execute("return #T.get()", tools=[{"name": "T", "functions": ["get"]}],
                       limits={"max_reductions": 1000},
                       handlers={"T.get": lambda args: big})
    assert r.ok and r.result["value"] == 200000, r
    assert r.result["stats"]["reductions"] == 0, r
