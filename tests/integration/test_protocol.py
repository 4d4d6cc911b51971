"""Wire format and the informational methods (docs/protocol.md §1-2, §3, §7)."""

import json
import subprocess

import pytest

import sbx
from conftest import DEFAULT_CONFIG, SANDBOXD_BIN

LIMIT_KEYS = ["timeout_ms", "max_heap", "max_reductions", "cpu_ms", "priority",
              "max_output_bytes", "max_bindings_bytes"]


# ------------------------------------------------------------------ methods

def test_ping(client):
    r = client.call("ping")
    assert r.ok and r.result == {}
    r = client.call("ping", {})
    assert r.ok and r.result == {}


def test_ping_string_id_echoed(client):
    r = client.call("ping", {}, id="abc-1")
    assert r.id == "abc-1" and r.result == {}
    r = client.call("ping", {}, id=0)
    assert r.id == 0 and r.result == {}


def _leaves(v, ctx=()):
    """(context names, leaf value) for every leaf of a JSON tree.  The context
    holds the object keys on the path and the "name"/"key" fields of enclosing
    objects, so any reasonable shape of `describe` can be searched."""
    if isinstance(v, dict):
        extra = tuple(str(v[k]) for k in ("name", "key", "limit") if isinstance(v.get(k), str))
        for k, x in v.items():
            yield from _leaves(x, ctx + extra + (k,))
    elif isinstance(v, list) and not all(isinstance(x, str) for x in v):
        for x in v:
            yield from _leaves(x, ctx)
    else:
        yield ctx, v


def test_describe(client):
    r = client.call("describe")
    assert r.ok, r
    d = r.result
    assert isinstance(d, dict)
    assert d.get("name") == "sandboxd"
    assert isinstance(d.get("version"), str) and d["version"]
    proto = [k for k in d if "protocol" in k.lower()]
    assert proto, "describe has no protocol version: %r" % d
    assert d[proto[0]] not in (None, "", [], {})
    # the method list
    lists = [v for _, v in _leaves(d) if isinstance(v, list)]
    wanted = {"execute", "check", "binding_names", "prompt_info", "ping", "describe"}
    assert any(wanted <= set(x) for x in lists), "no method list with %r in %r" % (wanted, d)
    # default and maximum of every limit, as configured
    leaves = list(_leaves(d))
    for key in LIMIT_KEYS:
        vals = [v for ctx, v in leaves if key in ctx]
        dflt = DEFAULT_CONFIG["defaults"][key]
        ceil = DEFAULT_CONFIG["ceilings"][key]
        assert dflt in vals, "describe lacks the default %s = %r: %r" % (key, dflt, d)
        assert ceil in vals, "describe lacks the maximum %s = %r: %r" % (key, ceil, d)


def test_describe_version_matches_binary(client):
    d = client.call("describe").result
    p = subprocess.run([SANDBOXD_BIN, "--version"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0
    assert d["version"] in p.stdout + p.stderr
    # the protocol: its major version an integer (as since 1.0), the whole
    # "major.minor" a string, and --version prints the whole one
    assert d["protocol_version"] == 1 and d["protocol"] == "1.2", d
    assert p.stdout == "sandboxd %s (protocol %s)\n" % (d["version"], d["protocol"]), p.stdout


def test_prompt_info(client):
    r = client.call("prompt_info")
    assert r.ok, r
    p = r.result
    assert p["language"] == "Lua 5.3"
    c = p["constraints"]
    assert isinstance(c, str)
    low = c.lower()
    for word in ("return", "global", "print"):
        assert word in low, "constraints do not mention %r:\n%s" % (word, c)
    bullets = [ln for ln in c.splitlines() if ln.lstrip().startswith(("- ", "* "))]
    assert len(bullets) >= 2, "constraints are not a markdown bullet list:\n%s" % c
    t = p["tool_usage"]
    assert isinstance(t, str) and t.strip()
    assert "\n" not in t.strip(), "tool_usage is not one line: %r" % t


def test_binding_names_empty(client):
    r = client.call("binding_names", {"bindings": []})
    assert r.ok and r.result == []


def test_binding_names_of_real_bindings(client):
    res = client.exec_ok("zeta = 1; alpha = 'a'; local hidden = 3; function f() end")
    r = client.call("binding_names", {"bindings": res["bindings"]})
    assert r.ok, r
    assert sorted(r.result) == ["alpha", "zeta"]
    assert r.result == res["binding_names"]
    # stable order
    assert client.call("binding_names", {"bindings": res["bindings"]}).result == r.result


def test_binding_names_malformed(client):
    r = client.call("binding_names", {"bindings": "garbage"})
    assert r.code == -32602 and r.kind == "invalid_params", r
    r = client.call("binding_names", {"bindings": [[1, 2, 3]]})
    assert r.code == -32602 and r.kind == "invalid_params", r


# ------------------------------------------------------------------ wire errors

def test_invalid_json(client):
    client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
    r = client.next_response()
    assert r.code == -32700 and r.kind == "parse_error", r
    assert r.id == 1                    # readable before the fault: echoed
    client.send_raw(b"this is not json\n")
    r = client.next_response()
    assert r.code == -32700 and r.id is None
    client.ping()


def test_invalid_utf8_line(client):
    client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}\n')
    r = client.next_response()
    assert r.code in (-32700, -32600), r
    client.ping()


def test_batch_rejected(client):
    client.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]\n')
    r = client.next_response()
    assert r.code == -32600 and r.kind == "invalid_request", r
    assert r.id is None
    client.assert_quiet_until_ping()
    client.send_raw(b"[]\n")
    r = client.next_response()
    assert r.code == -32600, r
    client.assert_quiet_until_ping()


@pytest.mark.parametrize("line", [
    b'{"id":5,"method":"ping"}',                       # no jsonrpc
    b'{"jsonrpc":"1.0","id":5,"method":"ping"}',       # wrong version
    b'{"jsonrpc":2.0,"id":5,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":5,"method":7}',            # method not a string
    b'{"jsonrpc":"2.0","id":5}',                       # neither request nor response
    b'"ping"',
    b'42',
    b'null',
])
def test_invalid_request(client, line):
    client.send_raw(line + b"\n")
    r = client.next_response()
    assert r.code == -32600 and r.kind == "invalid_request", r
    assert r.id in (5, None)
    client.assert_quiet_until_ping()


@pytest.mark.parametrize("idtext", [b"1.5", b"true", b"{}", b"[1]", b"1e3"])
def test_bad_id_types(client, idtext):
    client.send_raw(b'{"jsonrpc":"2.0","id":' + idtext + b',"method":"ping"}\n')
    r = client.next_response()
    assert r.code == -32600 and r.kind == "invalid_request", r
    assert r.id is None
    client.assert_quiet_until_ping()


def test_unknown_method(client):
    r = client.call("no/such/method", {})
    assert r.code == -32601 and r.kind == "method_not_found", r
    assert r.id is not None
    r = client.call("tool/call", {})     # daemon-to-client method, not served by the daemon
    assert r.code == -32601, r


@pytest.mark.parametrize("params", [
    {},                                               # code missing
    {"code": 5},
    {"code": None},
    {"code": ["return 1"]},
    {"code": "return 1", "tools": "Weather"},
    {"code": "return 1", "tools": [5]},
    {"code": "return 1", "tools": [{"functions": ["get"]}]},
    {"code": "return 1", "tools": [{"name": 5}]},
    {"code": "return 1", "tools": [{"name": "W", "module": 5}]},
    {"code": "return 1", "tools": [{"name": "W", "functions": "get"}]},
    {"code": "return 1", "tools": [{"name": "W", "functions": [5]}]},
    {"code": "return 1", "tools": [{"name": "W", "functions": [{"arities": [1]}]}]},
    {"code": "return 1", "tools": [{"name": "W", "functions": [{"name": "get", "arities": ["a"]}]}]},
    {"code": "return 1", "tools": [{"name": "W", "functions": [{"name": "get", "arities": 1}]}]},
    {"code": "return 1", "timeout_ms": "soon"},
    {"code": "return 1", "timeout_ms": 1.5},
    {"code": "return 1", "timeout_ms": -5},
    {"code": "return 1", "timeout_ms": True},
    {"code": "return 1", "limits": 5},
    {"code": "return 1", "limits": {"max_heap": "lots"}},
    {"code": "return 1", "limits": {"max_reductions": -1}},
    {"code": "return 1", "limits": {"cpu_ms": "fast"}},
    {"code": "return 1", "limits": {"priority": "urgent"}},
    {"code": "return 1", "limits": {"priority": 1}},
    {"code": "return 1", "limits": {"max_output_bytes": "big"}},
    {"code": "return 1", "limits": {"max_output_bytes": "infinity"}},
    {"code": "return 1", "limits": {"max_bindings_bytes": [1]}},
    {"code": "return 1", "bindings": 5},
    {"code": "return 1", "bindings": "opaque"},
])
def test_execute_invalid_params(client, params):
    r = client.call("execute", params)
    assert r.code == -32602 and r.kind == "invalid_params", r
    assert not client.tool_calls


def test_params_not_an_object(client):
    r = client.call("execute", ["return 1"])
    assert r.code == -32602 and r.kind == "invalid_params", r


@pytest.mark.parametrize("params", [
    {"code": 5},
    {},
    {"code": "return 1", "tools": "x"},
])
def test_check_invalid_params(client, params):
    r = client.call("check", params)
    assert r.code == -32602 and r.kind == "invalid_params", r


@pytest.mark.parametrize("extra", [
    {"timeout_ms": 10 ** 9},
    {"timeout_ms": "infinity"},
    {"limits": {"max_heap": 10 ** 10}},
    {"limits": {"max_heap": "infinity"}},
    {"limits": {"max_reductions": 5000000000}},
    {"limits": {"cpu_ms": "infinity"}},
    {"limits": {"priority": "high"}},
    {"limits": {"max_output_bytes": 16777217}},
    {"limits": {"max_bindings_bytes": 100000001}},
])
def test_limit_above_ceiling(client, extra):
    params = {"code": "return 1"}
    params.update(extra)
    r = client.call("execute", params)
    assert r.code == -32602 and r.kind == "limit_out_of_range", r
    key = list(extra.get("limits", extra))[0]
    assert key in r.message or key in json.dumps(r.data), "error does not name %s: %r" % (key, r)


def test_limits_at_ceiling_accepted(client):
    c = DEFAULT_CONFIG["ceilings"]
    r = client.execute("return 7", timeout_ms=c["timeout_ms"],
                       limits={k: c[k] for k in ("max_heap", "max_reductions", "cpu_ms", "priority",
                                                 "max_output_bytes", "max_bindings_bytes")})
    assert r.ok and r.result["value"] == 7, r


# ------------------------------------------------------------------ framing

def test_blank_lines_and_crlf(client):
    client.send_raw(b'\n\n   \n\t\n{"jsonrpc":"2.0","id":"c1","method":"ping"}\r\n\r\n')
    r = client.next_response()
    assert r.id == "c1" and r.result == {}
    client.send_raw(b'{"jsonrpc":"2.0","id":"c2","method":"execute","params":{"code":"return 1+1"}}\r\n')
    r = client.next_response()
    assert r.id == "c2" and r.result["value"] == 2, r
    client.assert_quiet_until_ping()


def test_message_split_across_writes(client):
    line = b'{"jsonrpc":"2.0","id":"split","method":"execute","params":{"code":"return 40+2"}}\n'
    for i in range(0, len(line), 7):
        client.send_raw(line[i:i + 7])
    r = client.wait("split")
    assert r.result["value"] == 42


def test_several_messages_in_one_write(client):
    client.send_raw(b''.join(
        b'{"jsonrpc":"2.0","id":%d,"method":"execute","params":{"code":"return %d"}}\n' % (i, i)
        for i in range(1, 6)))
    for i in range(1, 6):
        assert client.wait(i).result["value"] == i


def test_notifications_get_no_reply(client):
    client.notify("no/such/notification", {"x": 1})
    client.notify("ping")
    client.notify("$/cancelRequest", {"id": 987654})       # nothing to cancel
    client.notify("$/cancelRequest", {"id": {"x": 1}})     # malformed: still no reply
    client.notify("$/cancelRequest", {})
    client.notify("$/cancelRequest")
    client.send_raw(b'{"jsonrpc":"2.0","id":"nobody","result":5}\n')   # response to nothing
    client.send_raw(b'{"jsonrpc":"2.0","id":"nobody2","error":{"code":1,"message":"x"}}\n')
    client.assert_quiet_until_ping()


def test_refusals_carry_a_readable_id(daemon_factory):
    """A line refused before it is classified (too dense to parse, longer
    than max_message_bytes, not JSON) is answered with its id whenever a
    scan of its top-level members can read one, so a client waiting for
    that id is not left hanging: a 2 MiB ping of 699,000 empty arrays (a
    tree of ~95 MiB against a budget of 24 MiB), with its id before or
    after them; a line over the limit whose id comes before the cut.  Null
    stays for lines with no readable id: no id, an id past the cut, an id
    of a type ids cannot have, text that is not an object.  Lines of 2 MiB
    take the same paths as lines of 16 MiB (above RPC_PASS_MIN, far over
    the budget) at an eighth of the time, which counts under ASan."""
    big = 2 << 20
    d = daemon_factory(daemon={"max_message_bytes": big})
    c = d.client(timeout=60 * sbx.SCALE)
    arrays = b",".join([b"[]"] * 699000)
    for line, want in [
            (b'{"jsonrpc":"2.0","id":"dense-1","method":"ping","params":{"x":[' + arrays + b"]}}",
             "dense-1"),
            (b'{"jsonrpc":"2.0","method":"ping","params":{"x":[' + arrays + b']},"id":42}', 42),
            (b'{"jsonrpc":"2.0","method":"ping","params":{"x":[' + arrays + b"]}}", None)]:
        assert len(line) < big
        c.send_raw(line + b"\n")
        r = c.next_response()
        assert r.kind == "message_too_large" and r.id == want, r
    pad = b"y" * big
    for line, want in [
            (b'{"jsonrpc":"2.0","id":"long-1","method":"ping","params":{"p":"' + pad + b'"}}',
             "long-1"),
            (b'{"jsonrpc":"2.0","method":"ping","params":{"p":"' + pad + b'"},"id":"late"}', None)]:
        c.send_raw(line + b"\n")
        r = c.next_response()
        assert r.kind == "message_too_large" and r.id == want, r
    for line, kind, want in [
            (b'{"jsonrpc":"2.0","id":"p1","method":"ping","params":{"x":}}', "parse_error", "p1"),
            (b'{"jsonrpc":"2.0","id":"p2","id":7,"method":"ping","params":[1,}', "parse_error", 7),
            (b'{"jsonrpc":"2.0","id":1.5,"method":"ping","params":{"x":}}', "parse_error", None),
            (b'{"jsonrpc":"2.0","method":"ping","params":[', "parse_error", None),
            (b'this is not json', "parse_error", None)]:
        c.send_raw(line + b"\n")
        r = c.next_response()
        assert r.kind == kind and r.id == want, (line, r)
    c.assert_quiet_until_ping()


def test_message_too_large(daemon_factory):
    d = daemon_factory(daemon={"max_message_bytes": 4096})
    a = d.client()
    b = d.client()
    # exactly max_message_bytes is accepted
    head = b'{"jsonrpc":"2.0","id":"exact","method":"execute","params":{"code":"return 1 --'
    tail = b'"}}'
    line = head + b"x" * (4096 - len(head) - len(tail)) + tail
    assert len(line) == 4096
    a.send_raw(line + b"\n")
    r = a.next_response()
    assert r.id == "exact" and r.ok and r.result["value"] == 1, r
    # one byte more is refused
    line = head + b"x" * (4097 - len(head) - len(tail)) + tail
    a.send_raw(line + b"\n")
    r = a.next_response()
    assert r.code == -32600 and r.kind == "message_too_large", r
    a.assert_quiet_until_ping()
    # a much bigger one, sent in pieces, while another connection works
    big = b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"p":"' + b"y" * 3000000 + b'"}}\n'
    a.send_raw(big[:1000000])
    b.ping()
    assert b.value("return 'other'") == "other"
    a.send_raw(big[1000000:])
    r = a.next_response()
    assert r.code == -32600 and r.kind == "message_too_large", r
    a.assert_quiet_until_ping()
    assert a.value("return 3") == 3
    b.ping()
    assert d.alive()


def test_client_may_send_unicode(client):
    assert client.value("return 'h\u00e9llo \u2603 \U0001F600'") == "h\u00e9llo \u2603 \U0001F600"
    assert client.value("return #'\u00e9'") == 2


def test_response_sizes_are_bounded(daemon_factory):
    """docs (sandboxd.conf, protocol.md): max_message_bytes bounds what a client
    sends and the encoded value an execution returns; captured output is bounded
    by max_output_bytes, bindings by max_bindings_bytes, error messages by a
    fixed cut.  Every one of these still gets an answer of a contract kind."""
    d = daemon_factory(daemon={"max_message_bytes": 65536})
    c = d.client()
    r = c.exec_err("return string.rep('v', 100000)", kind="runtime_error")
    assert "larger than" in r.message
    # keys count as written: 20000 control bytes print as 120000 (\u0001 each)
    r = c.exec_err("return {[string.rep('\\1', 20000)] = 1}", kind="runtime_error")
    assert "larger than" in r.message
    r = c.exec_err("error(string.rep('e', 100000))", kind="runtime_error")
    assert len(r.raw.encode("utf-8")) < 65536
    res = c.exec_ok("print(string.rep('p', 100000)) return 1",
                    limits={"max_output_bytes": 1000})
    assert res["output_truncated"] is True and len(res["output"]) == 1000
    c.exec_err("big = string.rep('b', 100000)", kind="bindings_too_large",
               limits={"max_bindings_bytes": 1000})
    c.ping()