"""sandboxctl, the real binary against the real daemon (docs/sandboxctl.1,
docs/sandboxctl.1): every command, flag and exit status, tool handlers,
bindings, code sources, -v, Ctrl-C.

A few cases need a daemon that misbehaves (protocol errors, a daemon that
never answers a cancel); those use FakeDaemon, a scripted one-connection
server in this file.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import SANDBOXCTL_BIN
from sbx import SCALE

RUN_TIMEOUT = 30 * SCALE


# ----------------------------------------------------------------- helpers

def run_ctl(args, socket_path=None, input=None, env=None, timeout=RUN_TIMEOUT, cwd=None):
    """Run sandboxctl to completion.  stdin is empty unless input is given,
    so nothing ever waits on the test runner's terminal."""
    argv = [SANDBOXCTL_BIN]
    if socket_path is not None:
        argv += ["-s", socket_path]
    full_env = dict(os.environ)
    full_env.pop("SANDBOXD_SOCKET", None)
    full_env.update(env or {})
    return subprocess.run(argv + list(args), input=(input or "").encode(), capture_output=True,
                          env=full_env, timeout=timeout, cwd=cwd)


def out(p):
    return p.stdout.decode()


def err(p):
    return p.stderr.decode()


def stdout_json(p):
    return json.loads(p.stdout)


def last_error_json(p):
    """The error object sandboxctl printed on stderr (compact, since stderr is
    a pipe): the last line that parses as a JSON object with "code"."""
    for line in reversed(err(p).splitlines()):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and "code" in v:
            return v
    raise AssertionError("no error object on stderr:\n" + err(p))


@pytest.fixture
def ctl(daemon):
    """ctl(*args, **kw): sandboxctl -s <the module daemon> args..."""
    def run(*args, **kw):
        return run_ctl(args, socket_path=daemon.socket_path, **kw)
    return run


@pytest.fixture
def tmpdir_path():
    d = tempfile.mkdtemp(prefix="sbxctl-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


class FakeDaemon:
    """Accepts one connection on a private socket, reads the first request and
    hands the connection to script(conn, reader, request)."""

    def __init__(self, script):
        self.dir = tempfile.mkdtemp(prefix="sbxfake-", dir="/tmp")
        self.path = os.path.join(self.dir, "fake.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.srv.settimeout(RUN_TIMEOUT)
        self.script = script
        self.request = None
        self.lines = []
        self.done = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        conn = None
        try:
            conn, _ = self.srv.accept()
            conn.settimeout(RUN_TIMEOUT)
            reader = conn.makefile("rb")
            self.request = json.loads(reader.readline())
            self.script(self, conn, reader, self.request)
        except Exception as e:  # reported by close()
            self.error = e
        finally:
            if conn is not None:
                conn.close()
            self.done.set()

    def read_line(self, reader):
        line = reader.readline()
        if line:
            self.lines.append(json.loads(line))
        return line

    def close(self):
        self.done.wait(RUN_TIMEOUT)
        self.srv.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.error is not None:
            raise AssertionError("fake daemon failed: %r" % (self.error,))


@pytest.fixture
def fake():
    made = []

    def make(script):
        f = FakeDaemon(script)
        made.append(f)
        return f
    yield make
    for f in made:
        f.close()


def answer(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


# ----------------------------------------------------------------- ping, describe, call

def test_ping(ctl):
    p = ctl("ping")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == {}
    assert err(p) == ""


def test_describe(ctl):
    p = ctl("describe")
    assert p.returncode == 0, err(p)
    d = stdout_json(p)
    text = json.dumps(d)
    for m in ("execute", "check", "binding_names", "prompt_info", "ping", "describe"):
        assert m in text


def test_call_params_argument(ctl):
    p = ctl("call", "execute", '{"code": "print(\'hi\') return 1 + 1"}')
    assert p.returncode == 0, err(p)
    r = stdout_json(p)
    assert r["value"] == 2
    assert r["output"] == "hi\n"
    assert "bindings" in r and "stats" in r


def test_call_params_from_stdin(ctl):
    p = ctl("call", "execute", "-", input='{"code": "return \'from stdin\'"}')
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["value"] == "from stdin"


def test_call_params_from_file(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "params.json"), '{"code": "return 7"}')
    p = ctl("call", "execute", "@" + f)
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["value"] == 7


def test_call_without_params(ctl):
    p = ctl("call", "prompt_info")
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["language"] == "Lua 5.3"


def test_call_error_goes_to_stderr(ctl):
    p = ctl("call", "no_such_method")
    assert p.returncode == 2
    assert out(p) == ""
    e = last_error_json(p)
    assert e["code"] == -32601 and e["data"]["kind"] == "method_not_found"


def test_call_invalid_params_exit_2(ctl):
    p = ctl("call", "execute", '{"code": 5}')
    assert p.returncode == 2, err(p)
    assert last_error_json(p)["data"]["kind"] == "invalid_params"


def test_call_serves_tool_reply(ctl):
    params = {"code": "return Kv.get('a') .. Kv.get('b')",
              "tools": [{"name": "Kv", "functions": ["get"]}]}
    p = ctl("call", "execute", json.dumps(params), "--tool-reply", 'Kv.get="x"')
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["value"] == "xx"


def test_call_serves_tool_command(ctl):
    params = {"code": "return Kv.get('a', 1)",
              "tools": [{"name": "Kv", "functions": ["get"]}]}
    p = ctl("call", "execute", json.dumps(params), "--tool", "Kv.get=cat")
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["value"] == ["a", 1]


def test_call_does_not_add_declarations(ctl):
    """call sends PARAMS as given: --tool-reply alone declares nothing."""
    p = ctl("call", "execute", '{"code": "return type(Kv)"}', "--tool-reply", "Kv.get=1")
    assert p.returncode == 0, err(p)
    assert stdout_json(p)["value"] == "nil"


# ----------------------------------------------------------------- exec: code sources

def test_exec_inline(ctl):
    p = ctl("exec", "-e", "print('hello') print('world') return 1 + 1")
    assert p.returncode == 0, err(p)
    assert out(p) == "2\n"
    assert err(p) == "hello\nworld\n"


def test_exec_values(ctl):
    assert stdout_json(ctl("exec", "-e", "return")) is None
    assert stdout_json(ctl("exec", "-e", "return 1, 'a', true")) == [1, "a", True]
    assert out(ctl("exec", "-e", "return 1.0")) == "1.0\n"
    assert stdout_json(ctl("exec", "-e", "return {a = {1, 2}}")) == {"a": [1, 2]}


def test_exec_from_file(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "s.lua"), "local x = 20\nreturn x * 2\n")
    p = ctl("exec", f)
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == 40


def test_exec_from_stdin_dash(ctl):
    p = ctl("exec", "-", input="return 'dash'")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == "dash"


def test_exec_from_stdin_implicit(ctl):
    p = ctl("exec", input="return 'implicit'")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == "implicit"


def test_exec_shebang_line_keeps_line_numbers(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "s.lua"),
              "#!/usr/bin/env -S sandboxctl exec\nlocal a = 1\nerror('on line 3')\n")
    p = ctl("exec", f)
    assert p.returncode == 1
    e = last_error_json(p)
    assert e["data"]["kind"] == "runtime_error"
    assert ":3:" in e["message"], e
    p = ctl("exec", "-", input="#!/bin/whatever\nreturn 5")
    assert stdout_json(p) == 5


def test_exec_missing_file_is_usage_error(ctl):
    p = ctl("exec", "/nonexistent/x.lua")
    assert p.returncode == 2
    assert "/nonexistent/x.lua" in err(p) and "No such file" in err(p)


def test_exec_code_not_utf8(ctl, tmpdir_path):
    f = os.path.join(tmpdir_path, "bad.lua")
    with open(f, "wb") as fh:
        fh.write(b"return '\xff'")
    p = ctl("exec", f)
    assert p.returncode == 2
    assert "UTF-8" in err(p)


# ----------------------------------------------------------------- exec: errors and exit codes

def test_exec_syntax_error_exit_1(ctl):
    p = ctl("exec", "-e", "return +")
    assert p.returncode == 1
    assert out(p) == ""
    e = last_error_json(p)
    assert e["code"] == -32001 and e["data"]["kind"] == "syntax_error"
    assert "output" not in e["data"]    # exec prints output as text, even when empty


def test_exec_runtime_error_prints_output_first(ctl):
    p = ctl("exec", "-e", "print('before') error('boom')")
    assert p.returncode == 1
    text = err(p)
    assert text.startswith("before\n"), text
    e = last_error_json(p)
    assert e["data"]["kind"] == "runtime_error"
    assert "boom" in e["message"]
    assert "output" not in e["data"]    # printed as text above, not twice


def test_exec_timeout_exit_3(ctl):
    p = ctl("exec", "-e", "while true do end", "--timeout", str(300 * SCALE))
    assert p.returncode == 3, err(p)
    assert last_error_json(p)["data"]["kind"] == "timeout"


def test_exec_reductions_limit_exit_3(ctl):
    p = ctl("exec", "-e", "while true do end", "--limit", "max_reductions=100000")
    assert p.returncode == 3, err(p)
    assert last_error_json(p)["data"]["kind"] == "reductions_limit"


def test_exec_memory_limit_exit_3(ctl):
    p = ctl("exec", "-e", "local t = {} for i = 1, 1e8 do t[i] = ('x'):rep(64) .. i end",
            "--limit", "max_heap=4000000")
    assert p.returncode == 3, err(p)
    assert last_error_json(p)["data"]["kind"] == "memory_limit"


def test_exec_limit_out_of_range_exit_2(ctl):
    p = ctl("exec", "-e", "return 1", "--limit", "max_heap=999999999999")
    assert p.returncode == 2, err(p)
    assert last_error_json(p)["data"]["kind"] == "limit_out_of_range"
    # "infinity" is sent as a string; the test ceilings are finite
    p = ctl("exec", "-e", "return 1", "--limit", "cpu_ms=infinity")
    assert p.returncode == 2, err(p)
    assert last_error_json(p)["data"]["kind"] == "limit_out_of_range"


def test_exec_limits_accepted(ctl):
    p = ctl("exec", "-e", "return 3", "--limit", "priority=low", "--limit", "cpu_ms=5000",
            "--limit", "max_output_bytes=100", "--timeout", str(5000 * SCALE))
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == 3


def test_exec_bad_limit_value_exit_2(ctl):
    p = ctl("exec", "-e", "return 1", "--limit", "priority=urgent")
    assert p.returncode == 2, err(p)
    assert last_error_json(p)["data"]["kind"] in ("invalid_params", "limit_out_of_range")


def test_exec_code_too_large_exit_2(ctl):
    p = ctl("exec", "-", input="return 1 --" + "x" * 70000)
    assert p.returncode == 2, err(p)
    assert last_error_json(p)["data"]["kind"] == "code_too_large"


def test_exec_output_truncated_note(ctl):
    p = ctl("exec", "-e", "print(('x'):rep(100)) return 1", "--limit", "max_output_bytes=10")
    assert p.returncode == 0, err(p)
    assert err(p).startswith("x" * 10)
    assert "max_output_bytes" in err(p)


def test_check_command(ctl):
    p = ctl("check", "-e", "return 1")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == {"ok": True}
    p = ctl("check", "-e", "return +")
    assert p.returncode == 1
    e = last_error_json(p)
    assert e["data"]["kind"] == "syntax_error"
    # the shape exec's errors have: the output is text on stderr, not a field
    assert "output" not in e["data"] and "output_truncated" in e["data"], e


# ----------------------------------------------------------------- bindings

def test_bindings_saved_and_loaded(ctl, tmpdir_path):
    f = os.path.join(tmpdir_path, "state.json")
    p = ctl("exec", "-e", "n = 41 f = 0.5 t = {1, 2, x = 'y'}", "--save-bindings", f)
    assert p.returncode == 0, err(p)
    saved = open(f).read()
    assert saved.endswith("\n")
    json.loads(saved)
    p = ctl("exec", "-e", "n = n + 1 return n, f, t.x, math.type(f)",
            "--bindings", f, "--save-bindings", f)
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == [42, 0.5, "y", "float"]
    p = ctl("exec", "-e", "return n", "--bindings", f)
    assert stdout_json(p) == 42


def test_bindings_from_stdin(ctl, tmpdir_path):
    f = os.path.join(tmpdir_path, "state.json")
    assert ctl("exec", "-e", "z = 'zz'", "--save-bindings", f).returncode == 0
    p = ctl("exec", "-e", "return z", "--bindings", "-", input=open(f).read())
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == "zz"


def test_bindings_not_written_on_error(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "state.json"), "[]\n")
    p = ctl("exec", "-e", "q = 1 error('no')", "--save-bindings", f)
    assert p.returncode == 1
    assert open(f).read() == "[]\n"


def test_bindings_file_invalid_json_exit_2(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "state.json"), "{not json")
    p = ctl("exec", "-e", "return 1", "--bindings", f)
    assert p.returncode == 2
    assert f in err(p) and "not valid JSON" in err(p)


def test_save_bindings_unwritable_exit_74(ctl):
    p = ctl("exec", "-e", "return 9", "--save-bindings", "/nonexistent-dir/state.json")
    assert p.returncode == 74, err(p)
    assert stdout_json(p) == 9
    assert "/nonexistent-dir/state.json" in err(p)


# ----------------------------------------------------------------- tool handlers

def test_tool_command_success(ctl):
    p = ctl("exec", "-e", "return Weather.get('Oslo', 3)", "--tool", "Weather.get=cat")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == ["Oslo", 3]


def test_tool_command_any_json_value_and_env(ctl):
    cmd = 'printf \'"%s.%s"\' "$SANDBOXCTL_TOOL" "$SANDBOXCTL_FUNCTION"'
    p = ctl("exec", "-e", "return T.name(), T.num(), T.null()",
            "--tool", "T.name=" + cmd, "--tool", "T.num=echo 2.5", "--tool", "T.null=echo null")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == ["T.name", 2.5, None]


def test_tool_command_stderr_on_success_is_shown(ctl):
    p = ctl("exec", "-e", "return T.f()", "--tool", "T.f=echo debugging >&2; echo 1")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == 1
    assert "debugging" in err(p)


def test_tool_command_nonzero_exit_is_error_with_stderr(ctl):
    p = ctl("exec", "-e", "return pcall(Db.get, 1)",
            "--tool", "Db.get=echo 'no such row' >&2; exit 3")
    assert p.returncode == 0, err(p)
    ok, msg = stdout_json(p)
    assert ok is False
    assert msg.endswith("Db.get: no such row"), msg


def test_tool_command_nonzero_exit_without_stderr(ctl):
    p = ctl("exec", "-e", "return pcall(Db.get)", "--tool", "Db.get=exit 5")
    ok, msg = stdout_json(p)
    assert ok is False and "exited with status 5" in msg, msg


def test_tool_command_error_uncaught_exit_1(ctl):
    p = ctl("exec", "-e", "return Db.get()", "--tool", "Db.get=echo broken >&2; exit 1")
    assert p.returncode == 1
    e = last_error_json(p)
    assert e["data"]["kind"] == "runtime_error"
    assert "Db.get: broken" in e["message"]


def test_tool_command_output_not_json(ctl):
    p = ctl("exec", "-e", "return pcall(T.f)", "--tool", "T.f=echo hello world")
    ok, msg = stdout_json(p)
    assert ok is False
    assert "tool command output is not JSON" in msg and "hello world" in msg, msg
    p = ctl("exec", "-e", "return pcall(T.f)", "--tool", "T.f=true")
    ok, msg = stdout_json(p)
    assert ok is False and "not JSON" in msg and "printed nothing" in msg, msg


def test_tool_command_not_found(ctl):
    p = ctl("exec", "-e", "return pcall(T.f)", "--tool", "T.f=/nonexistent/tool-cmd")
    ok, msg = stdout_json(p)
    assert ok is False and "/nonexistent/tool-cmd" in msg, msg


def test_tool_command_exit_99_aborts_exit_4(ctl):
    p = ctl("exec", "-e", "pcall(T.f) return 'not reached'",
            "--tool", "T.f=echo stop everything >&2; exit 99")
    assert p.returncode == 4, err(p)
    assert last_error_json(p)["data"]["kind"] == "tool_aborted"
    assert out(p) == ""


def test_tool_command_large_args_and_result(ctl):
    p = ctl("exec", "-e", "local s = ('y'):rep(300000) local r = T.echo(s) return #r[1]",
            "--tool", "T.echo=cat")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == 300000


def test_tool_reply(ctl):
    p = ctl("exec", "-e", "return Clock.now() + Clock.now(), Cfg.get().mode",
            "--tool-reply", "Clock.now=21", "--tool-reply", 'Cfg.get={"mode": "fast"}')
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == [42, "fast"]


def test_tools_file_reference_only_and_arities(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "tools.json"), json.dumps([
        {"name": "Ref", "module": "MyApp.Ref"},
        {"name": "W", "module": "MyApp.W", "functions": [{"name": "get", "arities": [1]}]},
    ]))
    p = ctl("exec", "-e", "return Ref.__module, type(Ref.get), W.__module, W.get(5)",
            "--tools", f, "--tool", "W.get=cat")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == ["MyApp.Ref", "nil", "MyApp.W", [5]]
    p = ctl("exec", "-e", "return W.get(1, 2)", "--tools", f, "--tool", "W.get=cat")
    assert p.returncode == 1
    assert "W.get takes 1 argument" in last_error_json(p)["message"]


def test_declared_function_without_handler(ctl, tmpdir_path):
    f = write(os.path.join(tmpdir_path, "tools.json"),
              json.dumps([{"name": "W", "functions": ["get"]}]))
    p = ctl("exec", "-e", "return pcall(W.get)", "--tools", f)
    ok, msg = stdout_json(p)
    assert ok is False and "no handler for W.get" in msg, msg


def test_tool_options_usage_errors(ctl, tmpdir_path):
    for args in (["--tool", "nodot=cat"], ["--tool", "A.b"], ["--tool", ".b=cat"],
                 ["--tool", "A.=cat"], ["--tool", "A.b.c=cat"], ["--tool", "A.b="],
                 ["--tool-reply", "A.b={bad"], ["--tool-reply", "A.b=1", "--tool", "A.b=cat"],
                 ["--tools", "/nonexistent.json"],
                 ["--tools", write(os.path.join(tmpdir_path, "t.json"), '{"name": "x"}')]):
        p = ctl("exec", "-e", "return 1", *args)
        assert p.returncode == 2, (args, err(p))
        assert err(p).startswith("sandboxctl: "), (args, err(p))


# ----------------------------------------------------------------- output modes

def test_verbose_frames(ctl):
    p = ctl("-v", "exec", "-e", "print('p') return T.f(1)", "--tool-reply", "T.f=2")
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == 2
    lines = err(p).splitlines()
    sent = [json.loads(l[2:]) for l in lines if l.startswith("> ")]
    recv = [json.loads(l[2:]) for l in lines if l.startswith("< ")]
    others = [l for l in lines if not l.startswith(("> ", "< ", "* "))]
    assert others == ["p"], lines
    assert sent[0]["method"] == "execute" and sent[0]["params"]["code"].startswith("print")
    assert sent[0]["params"]["tools"] == [{"name": "T", "functions": ["f"]}]
    call = next(m for m in recv if m.get("method") == "tool/call")
    reply = next(m for m in sent if m.get("id") == call["id"])
    assert reply["result"] == 2
    assert recv[-1]["id"] == sent[0]["id"] and recv[-1]["result"]["value"] == 2
    assert lines[0].startswith("* connected to ")


def test_verbose_frames_are_exact_wire_lines(ctl):
    p = ctl("-v", "ping")
    lines = err(p).splitlines()
    assert '> {"jsonrpc":"2.0","id":1,"method":"ping"}' in lines
    assert any(l.startswith("< ") and json.loads(l[2:])["result"] == {} for l in lines)


def test_json_pretty_and_compact(ctl):
    code = "return {a = 1, b = {2, 3}}"
    compact = ctl("exec", "-e", code)
    assert out(compact).count("\n") == 1      # compact when piped
    pretty = ctl("--json=pretty", "exec", "-e", code)
    assert out(pretty).count("\n") > 3 and "\n  " in out(pretty)
    assert json.loads(out(pretty)) == json.loads(out(compact))
    forced = ctl("--json", "compact", "exec", "-e", code)
    assert out(forced) == out(compact)
    e = ctl("--json=pretty", "exec", "-e", "error('x')")
    assert e.returncode == 1 and "\n  " in err(e)


def test_raw_prints_response_exactly(ctl):
    p = ctl("-v", "--raw", "exec", "-e", "print('o') return 5")
    assert p.returncode == 0, err(p)
    received = [l[2:] for l in err(p).splitlines() if l.startswith("< ")]
    assert out(p) == received[-1] + "\n"
    r = json.loads(out(p))
    assert r["jsonrpc"] == "2.0" and r["result"]["value"] == 5 and r["result"]["output"] == "o\n"
    e = ctl("--raw", "exec", "-e", "error('bad')")
    assert e.returncode == 1
    assert json.loads(out(e))["error"]["data"]["kind"] == "runtime_error"


# ----------------------------------------------------------------- socket selection, connecting

def test_socket_from_environment(daemon):
    p = run_ctl(["ping"], env={"SANDBOXD_SOCKET": daemon.socket_path})
    assert p.returncode == 0, err(p)


def test_socket_option_overrides_environment(daemon):
    p = run_ctl(["ping"], socket_path=daemon.socket_path,
                env={"SANDBOXD_SOCKET": "/nonexistent/other.sock"})
    assert p.returncode == 0, err(p)
    p = run_ctl(["ping"], socket_path="/nonexistent/s.sock",
                env={"SANDBOXD_SOCKET": daemon.socket_path})
    assert p.returncode == 69


def test_default_socket_path():
    if os.path.exists("/run/sandboxd/sandboxd.sock"):
        pytest.skip("a system sandboxd is running")
    p = run_ctl(["ping"])
    assert p.returncode == 69
    assert "/run/sandboxd/sandboxd.sock" in err(p)


def test_cannot_connect_exit_69(tmpdir_path):
    path = os.path.join(tmpdir_path, "missing.sock")
    p = run_ctl(["exec", "-e", "return 1"], socket_path=path)
    assert p.returncode == 69
    assert path in err(p) and "No such file or directory" in err(p)
    stale = write(os.path.join(tmpdir_path, "stale.sock"), "")
    p = run_ctl(["ping"], socket_path=stale)
    assert p.returncode == 69
    assert stale in err(p) and "Connection refused" in err(p)


def test_forbidden_exit_77(daemon_factory):
    d = daemon_factory(daemon={"allow_uids": "54321", "allow_gids": "54321"})
    p = run_ctl(["exec", "-e", "return 1"], socket_path=d.socket_path)
    assert p.returncode == 77, err(p)
    assert last_error_json(p)["data"]["kind"] == "forbidden"


def test_busy_exit_75(daemon_factory):
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 1})
    spin = [SANDBOXCTL_BIN, "-v", "-s", d.socket_path, "exec", "-e", "while true do end"]
    procs = []
    try:
        for _ in range(2):      # one running, one queued
            q = subprocess.Popen(spin, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            procs.append(q)
            while not q.stderr.readline().startswith(b"> "):
                pass
            time.sleep(0.2 * SCALE)
        p = run_ctl(["exec", "-e", "return 1"], socket_path=d.socket_path)
        assert p.returncode == 75, err(p)
        assert last_error_json(p)["data"]["kind"] == "busy"
    finally:
        for q in procs:
            q.send_signal(signal.SIGINT)
        for q in procs:
            _, qerr = q.communicate(timeout=RUN_TIMEOUT)
            assert q.returncode == 4, (q.returncode, qerr)


# ----------------------------------------------------------------- usage errors

@pytest.mark.parametrize("args", [
    [],
    ["frobnicate"],
    ["--no-such-option", "ping"],
    ["-x", "ping"],
    ["ping", "extra"],
    ["call"],
    ["call", "execute", "{not json"],
    ["call", "execute", "@/nonexistent/params.json"],
    ["ping", "--timeout", "5"],
    ["describe", "-e", "return 1"],
    ["call", "ping", "--bindings", "x"],
    ["exec", "-e", "return 1", "file.lua"],
    ["exec", "-e", "return 1", "--timeout", "soon"],
    ["exec", "-e", "return 1", "--limit", "novalue"],
    ["exec", "-e", "return 1", "--limit", "=5"],
    ["--json=loud", "ping"],
    ["--raw=yes", "ping"],
    ["exec", "-e"],
    ["-s", "", "ping"],
    ["exec", "-", "--bindings", "-"],
])
def test_usage_errors_exit_2(daemon, args):
    p = run_ctl(["-v"] + args, socket_path=None, env={"SANDBOXD_SOCKET": daemon.socket_path})
    assert p.returncode == 2, (args, err(p))
    assert "sandboxctl: " in err(p)
    assert "> " not in err(p), "nothing may be sent on a usage error"


def test_help_and_version():
    p = run_ctl(["--help"])
    assert p.returncode == 0
    text = out(p)
    for word in ("call METHOD", "exec", "describe", "ping", "--tool NAME.FUNC=COMMAND",
                 "--tool-reply", "--tools FILE", "--save-bindings", "--limit KEY=VALUE",
                 "Exit status", "Examples", "SANDBOXD_SOCKET", "  76  protocol error"):
        assert word in text, word
    p = run_ctl(["-h"])
    assert p.returncode == 0 and out(p) == text
    p = run_ctl(["--version"])
    assert p.returncode == 0 and out(p).startswith("sandboxctl ")


def test_man_page_exists():
    here = os.path.dirname(os.path.abspath(__file__))
    page = os.path.join(here, "..", "..", "docs", "sandboxctl.1")
    text = open(page).read()
    for sec in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        assert ".Sh " + sec in text
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-mdoc", "-Tutf8", "-ww", "-z", page], capture_output=True)
        assert r.returncode == 0 and r.stderr == b"", r.stderr


# ----------------------------------------------------------------- Ctrl-C

def wait_for_cpu_worker(daemon):
    """Wait until a worker of daemon exists (the execution is running)."""
    daemon.wait_for_workers(1)
    time.sleep(0.2 * SCALE)


def test_ctrl_c_cancels_exit_4(daemon):
    proc = subprocess.Popen([SANDBOXCTL_BIN, "-s", daemon.socket_path, "exec", "-e",
                             "print('started') while true do end"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    wait_for_cpu_worker(daemon)
    proc.send_signal(signal.SIGINT)
    # the chunk never ends: exit 4 with `cancelled` is the Ctrl-C's doing (its
    # timeout would be exit 3); RUN_TIMEOUT is only a safety net
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 4, stderr
    text = stderr.decode()
    assert "cancel" in text
    assert "started\n" in text                  # output before the cancel
    e = last_error_json(subprocess.CompletedProcess([], 4, stdout, stderr))
    assert e["code"] == -32800 and e["data"]["kind"] == "cancelled"
    assert stdout == b""
    daemon.assert_no_leftovers()


def test_ctrl_c_sends_cancel_request(daemon):
    proc = subprocess.Popen([SANDBOXCTL_BIN, "-v", "-s", daemon.socket_path, "exec", "-e",
                             "while true do end"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    wait_for_cpu_worker(daemon)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 4
    sent = [json.loads(l[2:]) for l in stderr.decode().splitlines() if l.startswith("> ")]
    assert sent[1] == {"jsonrpc": "2.0", "method": "$/cancelRequest",
                       "params": {"id": sent[0]["id"]}}


def procs_with_cmdline(cmdline):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read() == cmdline:
                    found.append(int(name))
        except OSError:
            continue
    return found


def test_ctrl_c_kills_running_tool_command(daemon, tmpdir_path):
    marker = os.path.join(tmpdir_path, "started")
    seconds = "59.%d" % os.getpid()     # an argument no other sleep has
    proc = subprocess.Popen([SANDBOXCTL_BIN, "-s", daemon.socket_path, "exec", "-e",
                             "return T.slow()", "--tool",
                             "T.slow=touch %s; exec sleep %s" % (marker, seconds)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    cmdline = b"sleep\0" + seconds.encode() + b"\0"
    deadline = time.monotonic() + 60 * SCALE        # safety nets, not measures
    while not (os.path.exists(marker) and procs_with_cmdline(cmdline)):
        assert time.monotonic() < deadline, "the tool command never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 4, stderr
    assert b"cancelled" in stderr
    assert procs_with_cmdline(cmdline) == [], "the tool command survived the Ctrl-C"


def test_timeout_during_tool_command_kills_it(daemon):
    # a command of an hour: sandboxctl returns within RUN_TIMEOUT (a safety
    # net) only if the timeout killed it rather than waited for it
    seconds = "3599.%d" % os.getpid()
    p = run_ctl(["exec", "-e", "return T.slow()", "--timeout", str(300 * SCALE),
                 "--tool", "T.slow=exec sleep " + seconds], socket_path=daemon.socket_path)
    assert p.returncode == 3, err(p)
    assert last_error_json(p)["data"]["kind"] == "timeout"
    assert procs_with_cmdline(b"sleep\0" + seconds.encode() + b"\0") == []


def test_second_ctrl_c_exits_130(fake):
    got_cancel = threading.Event()

    def never_answer(f, conn, reader, req):
        f.read_line(reader)             # the $/cancelRequest
        got_cancel.set()
        reader.readline()               # until the client goes away

    f = fake(never_answer)
    proc = subprocess.Popen([SANDBOXCTL_BIN, "-s", f.path, "exec", "-e", "return 1"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(0.3 * SCALE)
    proc.send_signal(signal.SIGINT)
    assert got_cancel.wait(RUN_TIMEOUT)
    assert proc.poll() is None          # still waiting for the daemon's answer
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 130, stderr
    assert f.lines[0] == {"jsonrpc": "2.0", "method": "$/cancelRequest",
                          "params": {"id": f.request["id"]}}


# ----------------------------------------------------------------- protocol errors (fake daemon)

def run_against(fake, script, args=("ping",)):
    f = fake(script)
    return run_ctl(list(args), socket_path=f.path)


def test_protocol_error_invalid_json(fake):
    p = run_against(fake, lambda f, c, r, req: c.sendall(b"this is not json\n"))
    assert p.returncode == 76
    assert "invalid JSON" in err(p) and "this is not json" in err(p)


def test_protocol_error_not_jsonrpc(fake):
    p = run_against(fake, lambda f, c, r, req: c.sendall(b'{"id": 1, "result": {}}\n'))
    assert p.returncode == 76
    assert "not JSON-RPC 2.0" in err(p) and '{"id": 1' in err(p)


def test_protocol_error_eof_before_answer(fake):
    p = run_against(fake, lambda f, c, r, req: None)
    assert p.returncode == 76
    assert "closed the connection without answering" in err(p)


def test_protocol_error_eof_mid_message(fake):
    p = run_against(fake, lambda f, c, r, req: c.sendall(b'{"jsonrpc": "2.0", "id"'))
    assert p.returncode == 76
    assert "in the middle of a message" in err(p) and '"jsonrpc"' in err(p)


def test_protocol_error_unknown_id(fake):
    p = run_against(fake, lambda f, c, r, req: answer(
        c, {"jsonrpc": "2.0", "id": 999, "result": {}}))
    assert p.returncode == 76
    assert "never sent" in err(p)


def test_error_without_known_kind_is_76(fake):
    p = run_against(fake, lambda f, c, r, req: answer(
        c, {"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32099, "message": "odd", "data": {"kind": "strange"}}}))
    assert p.returncode == 76
    assert "strange" in err(p)


def test_null_id_error_is_the_answer(fake):
    """A daemon answers a request it could not read with id null."""
    p = run_against(fake, lambda f, c, r, req: answer(
        c, {"jsonrpc": "2.0", "id": None,
            "error": {"code": -32600, "message": "too large",
                      "data": {"kind": "message_too_large"}}}))
    assert p.returncode == 2
    assert last_error_json(p)["data"]["kind"] == "message_too_large"


def test_crlf_and_blank_lines_accepted(fake):
    def script(f, c, r, req):
        c.sendall(b"\r\n\n" + json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                          "result": {"pong": True}}).encode() + b"\r\n")
    p = run_against(fake, script)
    assert p.returncode == 0, err(p)
    assert stdout_json(p) == {"pong": True}


def test_unknown_daemon_request_gets_method_not_found(fake):
    def script(f, c, r, req):
        answer(c, {"jsonrpc": "2.0", "id": "d-1", "method": "weird/thing", "params": {}})
        f.read_line(r)
        answer(c, {"jsonrpc": "2.0", "id": req["id"], "result": {}})
    f = fake(script)
    p = run_ctl(["ping"], socket_path=f.path)
    assert p.returncode == 0, err(p)
    f.close()
    assert f.lines[0]["id"] == "d-1" and f.lines[0]["error"]["code"] == -32601


@pytest.mark.parametrize("kind,status", [
    ("syntax_error", 1), ("runtime_error", 1), ("invalid_params", 2),
    ("limit_out_of_range", 2), ("method_not_found", 2), ("code_too_large", 2),
    ("timeout", 3), ("memory_limit", 3), ("reductions_limit", 3), ("cpu_limit", 3),
    ("crashed", 3), ("bindings_too_large", 3), ("cancelled", 4), ("tool_aborted", 4),
    ("busy", 75), ("parse_error", 76), ("invalid_request", 76), ("internal_error", 76),
    ("forbidden", 77),
])
def test_exit_status_by_kind(fake, kind, status):
    """The whole table, including kinds the real daemon is hard to drive to."""
    p = run_against(fake, lambda f, c, r, req: answer(
        c, {"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32000, "message": kind, "data": {"kind": kind}}}),
        args=("exec", "-e", "return 1"))
    assert p.returncode == status, err(p)
