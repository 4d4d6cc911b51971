"""Attacks through the metatables a chunk can reach: the string metatable
(shared by every string) and _G's own, each filled with endless
metamethods, played as a hostile chunk against the real daemon, in a
session and stateless.  What must hold: no C code of the worker reads a
value through them once the chunk's limits are lifted, and the next
session starts with the stock metatable."""

import sbx
from test_attacks_sessions import T, chunk, chunk_ok, open_session


# ------------------------------------------------------- the string metatable

# Every metamethod a string can have, each an endless loop: if any C code of
# the worker read a string through the metatable after the chunk's limits
# were lifted (encoding results, bindings, snapshots, error messages,
# tracebacks, tool arguments), the chunk would never end.
POISON = """
local mt = getmetatable("")
local function spin() while true do end end
for _, k in ipairs({"__index", "__newindex", "__tostring", "__concat", "__len", "__eq",
                    "__lt", "__le", "__call", "__name", "__pairs", "__close", "__unm",
                    "__add", "__mode"}) do
  mt[k] = spin
end
mt.__metatable = "locked"
"""


def test_poisoned_string_metatable_in_a_session(client):
    sid = open_session(client, tools=[T], limits={"max_reductions": 2000000},
                       timeout_ms=10000 * sbx.SCALE)
    chunk_ok(client, sid, POISON)
    client.default_handlers = {"T.f": lambda a: a}
    # results with string keys and values, several values, nested tables
    r = chunk_ok(client, sid, "s = 'kept' t = {a = 'x', [1] = 'y', b = {c = 'z'}} "
                              "return 'str', t, #'abc'", return_bindings=True)
    assert r["value"] == ["str", {"1": "y", "a": "x", "b": {"c": "z"}}, 3], r
    assert set(r["binding_names"]) >= {"s", "t"}
    # a tool call with string arguments and a string answer
    assert chunk_ok(client, sid, "return T.f('arg', {k = 'v'})")["value"] == ["arg", {"k": "v"}]
    # a string error, an error with a string-keyed table, a syntax error
    r = chunk(client, sid, "error('boom')")
    assert r.kind == "runtime_error" and "boom" in r.message, r
    r = chunk(client, sid, "error({msg = 'x'})")
    assert r.kind == "runtime_error", r
    r = chunk(client, sid, "return 'unclosed")
    assert r.kind == "syntax_error", r
    # a snapshot reads the globals raw
    snap = client.call("session/snapshot", {"session": sid})
    assert snap.ok and set(snap.result["binding_names"]) >= {"s", "t"}, snap
    # the metatable is still the chunk's own (it stays changed in its session)
    assert chunk_ok(client, sid, "return getmetatable('')")["value"] == "locked"
    # a print of a string goes through tostring, which runs the chunk's
    # __tostring under the chunk's limits: a limit, not a hang
    r = chunk(client, sid, "print('x')")
    assert r.kind in ("reductions_limit", "runtime_error"), r
    client.default_handlers = None


def test_poisoned_string_metatable_stateless_results(client):
    r = client.execute(POISON + "s = 'g' return 'a', {b = 'c'}")
    assert r.ok, r
    assert r.result["value"] == ["a", {"b": "c"}]
    assert r.result["binding_names"] == ["s"]
    r = client.execute(POISON + "local x = nil; return x.field")
    assert r.kind == "runtime_error", r


def test_string_metatable_does_not_reach_the_next_session(client):
    a = open_session(client)
    chunk_ok(client, a, "getmetatable('').__index = function() return 'evil' end")
    assert chunk_ok(client, a, "return ('x').upper")["value"] == "evil"
    b = open_session(client)
    assert chunk_ok(client, b, "return ('x'):upper()")["value"] == "X"
    assert client.value("return ('x'):upper()") == "X"


def test_poisoned_globals_metatable_in_a_session(client):
    # _G's own metatable made hostile: snapshots and return_bindings read
    # the globals raw, and a chunk's own global access runs the metamethods
    # under its limits
    sid = open_session(client, limits={"max_reductions": 1000000})
    chunk_ok(client, sid, "x = 1 local function spin() while true do end end "
                          "setmetatable(_G, {__index = spin, __newindex = spin, __pairs = spin, "
                          "__len = spin, __metatable = 'no'})")
    r = chunk_ok(client, sid, "rawset(_G, 'y', 2) return 1", return_bindings=True)
    assert r["bindings"] == [["x", 1], ["y", 2]] or set(r["binding_names"]) == {"x", "y"}, r
    snap = client.call("session/snapshot", {"session": sid})
    assert snap.ok and set(snap.result["binding_names"]) == {"x", "y"}, snap
    r = chunk(client, sid, "return undefined_global")
    assert r.kind == "reductions_limit" and r.data["session_closed"] is True, r
