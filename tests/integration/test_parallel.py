"""parallel(f1, f2, ...) (docs/protocol.md §10): several tool calls of one
execution outstanding at once, answered in any order, results in argument
order, the error rule, nesting, and every limit still holding inside it."""

import time

import pytest

import sbx
from sbx import NO_REPLY, ToolError
from conftest import timed_out_past

T = {"name": "T", "functions": ["f", "g"]}


def hold_all(client, n, timeout=None):
    """Wait until n tool calls are deferred (outstanding together)."""
    return [client.wait_deferred(k, timeout) for k in range(1, n + 1)]


def test_calls_outstanding_together_answered_out_of_order(client):
    i = client.send_execute(
        "return parallel(function() return T.f(1) end,"
        "                function() return T.f(2) end,"
        "                function() return T.f(3) end)",
        tools=[T], handlers={"T.f": lambda a: NO_REPLY})
    calls = hold_all(client, 3)
    assert sorted(c.args[0] for c in calls) == [1, 2, 3]
    assert len({c.id for c in calls}) == 3
    assert all(c.execution_id == i for c in calls)
    for c in reversed(calls):       # the last call first
        client.reply(c, result=c.args[0] * 10)
    r = client.wait(i)
    assert r.ok, r
    assert r.result["value"] == [10, 20, 30]
    assert r.result["stats"]["tool_calls"] == 3


def test_results_in_argument_order_first_value_only(client):
    v = client.value("return parallel(function() return T.f(1), 'dropped' end,"
                     "                function() return nil end,"
                     "                function() return T.g('x') end)",
                     tools=[T], handlers={"T.f": lambda a: "one", "T.g": lambda a: a[0] * 2})
    assert v == ["one", None, "xx"]


def test_empty_and_bad_arguments(client):
    assert client.value("return select('#', parallel())") == 0
    r = client.exec_err("return parallel(function() end, 42)", kind="runtime_error")
    assert "function expected" in r.message


def test_first_error_in_argument_order_after_all_finished(client):
    seen = []

    def f(a):
        seen.append(a[0])
        if a[0] == "bad2":
            raise ToolError("second failure")
        return a[0]

    v = client.value(
        "local ok, err = pcall(parallel,"
        "  function() return T.f('ok') end,"
        "  function() error('first failure', 0) end,"
        "  function() return T.f('bad2') end,"
        "  function() return T.f('late') end)"
        "return ok, err",
        tools=[T], handlers={"T.f": f})
    assert v == [False, "first failure"]
    assert sorted(seen) == ["bad2", "late", "ok"]    # every branch ran to its end


def test_tool_error_catchable_inside_a_branch(client):
    def f(a):
        raise ToolError("nope %s" % a[0])
    v = client.value("return parallel(function() return select(2, pcall(T.f, 1)) end,"
                     "                function() return T.g(2) end)",
                     tools=[T], handlers={"T.f": f, "T.g": lambda a: a[0]})
    assert v == ["T.f: nope 1", 2]


def test_nested_parallel(client):
    v = client.value(
        "return parallel("
        "  function() return parallel(function() return T.f(1) end,"
        "                             function() return T.f(2) end) end,"
        "  function() return T.f(3) end,"
        "  function() local a, b = parallel(function() return T.g(4) end,"
        "                                   function() return T.g(5) end) return a + b end)",
        tools=[T], handlers={"T.f": lambda a: a[0], "T.g": lambda a: a[0] * 100})
    assert v == [1, 3, 900]
    assert len(client.tool_calls) == 5


def test_tool_calls_outside_parallel_in_the_same_chunk(client):
    i = client.send_execute(
        "local a = T.f('before')\n"
        "local x, y = parallel(function() return T.f('p1') end, function() return T.f('p2') end)\n"
        "local b = T.f('after')\n"
        "return {a, x, y, b}",
        tools=[T], handlers={"T.f": lambda a: NO_REPLY})
    first = client.wait_deferred(1)
    assert first.args == ["before"]
    client.reply(first, result="A")
    p = [client.wait_deferred(2), client.wait_deferred(3)]
    client.reply(p[1], result="Y" if p[1].args == ["p2"] else "X")
    client.reply(p[0], result="X" if p[0].args == ["p1"] else "Y")
    last = client.wait_deferred(4)
    assert last.args == ["after"]
    client.reply(last, result="B")
    r = client.wait(i)
    assert r.ok and r.result["value"] == ["A", "X", "Y", "B"], r
    assert r.result["stats"]["tool_calls"] == 4


def test_pcall_inside_a_branch_still_runs_concurrently(client):
    i = client.send_execute("return parallel(function() return select(2, pcall(T.f, 1)) end,"
                            "                function() return select(2, pcall(T.f, 2)) end)",
                            tools=[T], handlers={"T.f": lambda a: NO_REPLY})
    calls = hold_all(client, 2)
    for c in calls:
        client.reply(c, result=c.args[0])
    assert client.wait(i).result["value"] == [1, 2]


def test_call_in_a_plain_coroutine_inside_a_branch(client):
    v = client.value("return parallel(function() return coroutine.wrap(function()"
                     "  return T.f(1) end)() end, function() return T.f(2) end)",
                     tools=[T], handlers={"T.f": lambda a: a[0] + 1})
    assert v == [2, 3]


def test_own_yield_in_a_branch_is_an_error(client):
    r = client.exec_err("return parallel(function() coroutine.yield(1) end)",
                        kind="runtime_error")
    assert "yielded outside a tool call" in r.message


def test_max_parallel_calls_bounds_outstanding(daemon_factory):
    d = daemon_factory(daemon={"max_parallel_calls": 2})
    with d.client() as c:
        i = c.send_execute("local fs = {} for k = 1, 5 do fs[k] = function() return T.f(k) end end "
                           "return parallel(table.unpack(fs))",
                           tools=[T], handlers={"T.f": lambda a: NO_REPLY})
        answered = 0
        while answered < 5:
            c.wait_deferred(answered + 1)
            c.pump(0.2)     # anything more would have come by now
            outstanding = [x for x in c.deferred if not x.answered]
            assert len(outstanding) <= 2, outstanding
            x = outstanding[-1]
            c.reply(x, result=x.args[0])
            answered += 1
        r = c.wait(i)
        assert r.ok and r.result["value"] == [1, 2, 3, 4, 5], r
        assert c.call("describe").result["daemon"]["max_parallel_calls"] == 2


def test_tool_call_budget_counts_every_branch(client):
    seen = []
    r = client.exec_err("return parallel(function() return T.f(1) end, function() return T.f(2) end,"
                        "                function() return T.f(3) end)",
                        kind="tool_call_limit", tools=[T], limits={"max_tool_calls": 2},
                        handlers={"T.f": lambda a: seen.append(a[0]) or NO_REPLY})
    assert len(seen) == 2


# ------------------------------------------------------------------ limits inside parallel

def test_reductions_billed_inside_branches(client):
    r = client.exec_err("return pcall(parallel, function() while true do end end,"
                        "                       function() return 1 end)",
                        kind="reductions_limit", limits={"max_reductions": 100000})


def test_branch_instructions_billed(client):
    # each branch runs a few dozen instructions between its tool calls:
    # every one is billed (a branch's countdown runs on across its resumes
    # and it pays each period as it begins), so 80,000 of them do not fit
    # in 50,000, and fit in 200,000
    code = ("local fs = {} for k = 1, 50 do fs[k] = function() "
            "for j = 1, 40 do for i = 1, 30 do end T.f(j) end end end "
            "pcall(parallel, table.unpack(fs)) return 'done'")
    client.exec_err(code, kind="reductions_limit", tools=[T], limits={"max_reductions": 50000},
                    handlers={"T.f": lambda a: 0})
    r = client.exec_ok(code, tools=[T], limits={"max_reductions": 200000},
                       handlers={"T.f": lambda a: 0})
    assert 70000 <= r["stats"]["reductions"] <= 200000, r


def test_short_branches_neighbour(client):
    # the neighbour of 102-parallel-short-branches-billing: 500 branches of
    # about 104 instructions each fit in the 100,000 that 1000 exceed
    r = client.exec_ok("for i = 1, 500 do parallel(function() for j = 1, 100 do end end) end "
                       "return 'done'", limits={"max_reductions": 100000})
    assert r["value"] == "done"


def test_heap_capped_inside_branches(client):
    client.exec_err("local t = {} return pcall(parallel, function()"
                    "  for k = 1, 1e8 do t[k] = {k} end end)",
                    kind="memory_limit", limits={"max_heap": 8000000})


def test_memory_limit_with_calls_outstanding(client):
    # one branch exceeds the heap while another waits for its tool answer
    r = client.exec_err("return parallel(function() return T.f(1) end, function()"
                        "  local t = {} for k = 1, 1e8 do t[k] = {k} end end)",
                        kind="memory_limit", tools=[T], limits={"max_heap": 8000000},
                        handlers={"T.f": lambda a: NO_REPLY})


def test_timeout_with_calls_outstanding(client):
    r, _ = timed_out_past(client, "return parallel(function() return T.f(1) end,"
                          " function() return T.f(2) end)", calls=2, first_ms=500,
                          tools=[T], handlers={"T.f": lambda a: NO_REPLY})
    assert r.kind == "timeout", r
    assert r.data["stats"]["tool_calls"] == 2


def test_cancel_with_several_calls_outstanding(daemon):
    with daemon.client() as c:
        i = c.send_execute("return parallel(function() return T.f(1) end, function() return T.f(2) end,"
                           "                function() return T.f(3) end)",
                           tools=[T], handlers={"T.f": lambda a: NO_REPLY})
        calls = hold_all(c, 3)
        c.cancel(i)
        r = c.wait(i)
        assert r.kind == "cancelled", r
        for x in calls:         # late answers are ignored
            c.reply(x, result=1)
        c.ping()
    wait_no_workers(daemon)


def test_disconnect_with_several_calls_outstanding(daemon):
    c = daemon.client()
    c.send_execute("return parallel(function() return T.f(1) end, function() return T.f(2) end)",
                   tools=[T], handlers={"T.f": lambda a: NO_REPLY})
    hold_all(c, 2)
    c.close()
    wait_no_workers(daemon)


def wait_no_workers(daemon):
    deadline = time.monotonic() + sbx.SAFETY_NET
    with daemon.client() as c:
        while True:
            st = c.call("describe").result["state"]
            if st["workers"] == 0:
                return
            assert time.monotonic() < deadline, st
            time.sleep(0.05)


def test_parallel_is_not_a_binding_and_not_a_tool_name(client):
    r = client.exec_ok("x = 1 return type(parallel)")
    assert r["value"] == "function"
    assert r["binding_names"] == ["x"]
    r = client.execute("return 1", tools=[{"name": "parallel", "functions": ["f"]}])
    assert r.kind == "invalid_params", r


def test_describe_has_parallel(client):
    assert "parallel" in client.call("describe").result["features"]


def test_many_branches_answered_in_random_order(client):
    import random
    rng = random.Random(11)
    n = 40
    i = client.send_execute(
        "local fs = {} for k = 1, %d do fs[k] = function()"
        "  local a = T.f(k) local b = T.g(a) return a * 1000 + b end end "
        "return {parallel(table.unpack(fs))}" % n,
        tools=[T], handlers={"T.f": lambda a: NO_REPLY, "T.g": lambda a: NO_REPLY})
    answered = 0
    while answered < 2 * n:
        client.wait_deferred(answered + 1)
        client.pump(0.05)
        waiting = [x for x in client.deferred if not x.answered]
        assert len(waiting) <= 16, len(waiting)      # max_parallel_calls, the default
        x = rng.choice(waiting)
        client.reply(x, result=x.args[0] + (0 if x.function == "f" else 1))
        answered += 1
    r = client.wait(i)
    assert r.ok, r
    assert r.result["value"] == [k * 1000 + k + 1 for k in range(1, n + 1)]
    assert r.result["stats"]["tool_calls"] == 2 * n
