"""Attacks on parallel() (docs/protocol.md §3.8): more branches than
max_parallel_calls, parallel where a coroutine or an error handler runs it,
limits and yields with calls outstanding, forged and duplicated answers,
and the tool-call budget across branches, played as a hostile chunk and a
hostile client against the real daemon.  Each test states the attack and
what must hold."""

import pytest

from sbx import NO_REPLY, ToolError

T = {"name": "T", "functions": ["f", "g"]}


# ---------------------------------------------------------------- parallel

def test_more_branches_than_max_parallel_calls_nested(daemon_factory):
    d = daemon_factory(daemon={"max_parallel_calls": 2})
    with d.client() as c:
        out = []

        def f(args):
            out.append(args[0])
            return args[0] * 2
        code = """
        local fs = {}
        for i = 1, 9 do
          fs[i] = function()
            if i % 3 == 0 then
              return parallel(function() return T.f(i * 100) end,
                              function() return T.f(i * 100 + 1) end)
            end
            return T.f(i)
          end
        end
        return parallel(table.unpack(fs))
        """
        r = c.execute(code, tools=[T], handlers={"T.f": f})
        assert r.ok, r
        assert r.result["value"] == [2, 4, 600, 8, 10, 1200, 14, 16, 1800]
        assert r.result["stats"]["tool_calls"] == 12


def test_parallel_in_wrap_and_in_error_handlers(client):
    code = """
    local w = coroutine.wrap(function()
      return parallel(function() return T.f(1) end, function() return T.f(2) end)
    end)
    local a, b = w()
    local ok, e = xpcall(function() return T.g() end, function(m)
      return parallel(function() return T.f(3) end)
    end)
    local ok2, e2 = pcall(T.g)
    local p = {pcall(parallel, function() return T.f(4) end, function() error('br') end)}
    return {a, b, ok, e, ok2, p[1]}
    """
    def g(args):
        raise ToolError("no")
    r = client.execute(code, tools=[T], handlers={"T.f": lambda a: a[0], "T.g": g})
    assert r.ok, r
    v = r.result["value"]
    assert v[:3] == [1, 2, False] and v[4] is False and v[5] is False, v


@pytest.mark.parametrize("body", [
    "while true do end",
    "local t = {} while true do t[#t + 1] = ('x'):rep(1000) end",
])
def test_branch_limit_with_calls_outstanding_is_fatal(client, body):
    code = """
    local ok = pcall(parallel, function() return T.f(1) end,
                     function() %s end,
                     function() return pcall(T.f, 2) end)
    return 'escaped', ok
    """ % body
    i = client.send_execute(code, tools=[T], limits={"max_reductions": 3000000,
                                                    "max_heap": 16000000},
                            handlers={"T.f": lambda a: NO_REPLY})
    r = client.wait(i)
    assert r.kind in ("reductions_limit", "memory_limit"), r
    for call in client.deferred:
        client.reply(call, result=1)    # to a finished execution
    client.ping()


def test_branch_own_yield_with_calls_outstanding(client):
    code = """
    local ok, e = pcall(parallel, function() return T.f(1) end,
                        function() coroutine.yield() while true do end end)
    return ok, e
    """
    i = client.send_execute(code, tools=[T], limits={"max_reductions": 3000000},
                            handlers={"T.f": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    client.reply(call, result=1)
    r = client.wait(i)
    assert r.ok and r.result["value"][0] is False, r
    assert "yielded outside a tool call" in r.result["value"][1], r


def test_answers_duplicated_unknown_and_of_another_execution(client):
    tools = [T]
    i = client.send_execute("return parallel(function() return T.f(1) end,"
                            "                function() return T.f(2) end)",
                            tools=tools, handlers={"T.f": lambda a: NO_REPLY})
    j = client.send_execute("return T.f(3)", tools=tools,
                            handlers={"T.f": lambda a: NO_REPLY})
    calls = [client.wait_deferred(k) for k in (1, 2, 3)]
    by_exec = {}
    for call in calls:
        by_exec.setdefault(call.execution_id, []).append(call)
    ci, cj = by_exec[i], by_exec[j]
    # never made, forged with a NUL, and numbered past the real ones
    for bogus in ("sbx-999999-1", ci[0].id + "\u0000", ci[0].id + "0", 17, None,
                  ci[0].id.rsplit("-", 1)[0] + "-9"):
        client.send_msg({"jsonrpc": "2.0", "id": bogus, "result": "forged"})
    client.reply(ci[0], result="a")
    client.reply(ci[0], result="dup")               # answered already
    client.reply(ci[0], error={"code": 1, "message": "late", "data": {"abort": True}})
    client.reply(cj[0], result="j")
    client.reply(cj[0], result="j-dup")
    client.reply(ci[1], result="b")
    ri, rj = client.wait(i), client.wait(j)
    assert ri.ok and rj.ok, (ri, rj)
    assert sorted(ri.result["value"], key=str) == ["a", "b"] or ri.result["value"] in (
        ["a", "b"], ["b", "a"])
    assert rj.result["value"] == "j"
    # answers after the end, and after a cancel
    client.reply(ci[1], result="after")
    k = client.send_execute("return T.f(4)", tools=tools, handlers={"T.f": lambda a: NO_REPLY})
    ck = client.wait_deferred(4)
    client.cancel(k)
    r = client.wait(k)
    assert r.kind == "cancelled", r
    client.reply(ck, result="after cancel")
    client.ping()


def test_tool_call_budget_exact_under_parallel(client):
    par = "return parallel(" + ",".join("function() return T.f(%d) end" % n
                                        for n in range(1, 6)) + ")"
    r = client.execute(par, tools=[T], limits={"max_tool_calls": 5},
                       handlers={"T.f": lambda a: a[0]})
    assert r.ok and r.result["value"] == [1, 2, 3, 4, 5], r
    caught = "local ok = pcall(function() %s end) return 'escaped', ok" % par
    r = client.execute(caught, tools=[T], limits={"max_tool_calls": 4},
                       handlers={"T.f": lambda a: a[0]})
    assert r.kind == "tool_call_limit", r
    assert r.data["stats"]["tool_calls"] == 4, r


def test_tool_call_budget_under_parallel_with_calls_held(client):
    # the call past the budget ends the execution while the others wait
    code = ("local ok = pcall(parallel, function() return T.f(1) end,"
            " function() return T.f(2) end, function() return T.f(3) end) return ok")
    i = client.send_execute(code, tools=[T], limits={"max_tool_calls": 2},
                            handlers={"T.f": lambda a: NO_REPLY})
    r = client.wait(i)
    assert r.kind == "tool_call_limit", r
    for call in client.deferred:
        client.reply(call, result=0)      # answers to a finished execution
    client.ping()
