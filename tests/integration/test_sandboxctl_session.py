"""sandboxctl session (an interactive loop over one daemon session) and
exec --stream (output shown while the code runs)."""

import json
import os
import re
import subprocess
import time

import pytest

from conftest import SANDBOXCTL_BIN
from sbx import SAFETY_NET, SCALE
from test_sandboxctl import err, out, run_ctl


@pytest.fixture
def ctl(daemon):
    def run(*args, **kw):
        return run_ctl(args, socket_path=daemon.socket_path, **kw)
    return run


def test_exec_stream_shows_output_while_running(daemon):
    p = subprocess.Popen([SANDBOXCTL_BIN, "-s", daemon.socket_path, "exec", "--stream", "-e",
                          "print('early') local t = os.clock() "
                          "while os.clock() - t < %f do end print('late') return 7" % (1.0 * SCALE)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stderr.readline()
        assert first == b"early\n"
        assert p.poll() is None, "the output came only at the end"
        stdout, rest = p.communicate(timeout=30 * SCALE)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0
    assert rest == b"late\n"
    assert json.loads(stdout) == 7


def test_exec_stream_output_once(ctl):
    p = ctl("exec", "--stream", "-e", "print('a') print('b') return 1")
    assert p.returncode == 0, err(p)
    assert err(p) == "a\nb\n"
    assert out(p).strip() == "1"
    p = ctl("exec", "--stream", "-e", "print('before') error('boom')")
    assert p.returncode == 1
    assert err(p).count("before") == 1


def test_session_keeps_state_and_prints_values(ctl):
    script = ("x = 1\n"
              "1 + 1\n"
              "function f(a)\n"
              "  return a * 2\n"
              "end\n"
              "f(21)\n"
              "error('boom')\n"
              "x\n"
              "print('hi') return W.get(5)\n")
    p = ctl("session", "--tool-reply", "W.get=42", input=script)
    assert p.returncode == 0, err(p)
    assert out(p).split() == ["2", "42", "1", "42"]
    assert "runtime_error" in err(p) and "boom" in err(p)
    assert "hi\n" in err(p)


def test_session_ends_on_a_limit(ctl):
    p = ctl("session", "--timeout", "300", input="x = 1\nwhile true do end\nreturn x\n")
    assert p.returncode == 3, err(p)
    assert "timeout" in err(p)
    assert out(p) == ""


def test_session_restores_bindings(ctl, tmp_path):
    b = tmp_path / "b.json"
    p = ctl("exec", "-e", "n = 41", "--save-bindings", str(b))
    assert p.returncode == 0, err(p)
    p = ctl("session", "--bindings", str(b), input="n + 1\n")
    assert p.returncode == 0, err(p)
    assert out(p).strip() == "42"


def test_session_closed_at_eof(ctl, daemon):
    p = ctl("session", input="y = 2\n")
    assert p.returncode == 0, err(p)
    with daemon.client() as c:
        deadline = time.monotonic() + SAFETY_NET
        while c.call("describe").result["state"]["sessions"] != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def executions(d):
    """sandboxd_executions_total by kind, and the daemon's log lines of session chunks."""
    with d.client() as c:
        text = c.call("metrics").result["text"]
    kinds = dict(re.findall(r'^sandboxd_executions_total\{kind="(\w+)"\} (\d+)$', text, re.M))
    return {k: int(v) for k, v in kinds.items()}, re.findall(r"op=session outcome=(\w+)", d.stderr)


@pytest.mark.parametrize("script,shown,ran,errors", [
    # the README's example
    ("function sq(x) return x * x end\nsq(7)\n", ["49"], 2, 0),
    # blocks over several lines are sent once complete; a real syntax error is sent
    ("for i = 1, 2 do\n  x = i\nend\nx\nt = {\n  1,\n  2 }\nx = = 1\n#t\n", ["2", "2"], 4, 1),
], ids=["readme", "blocks"])
def test_session_sends_only_the_chunks_it_runs(daemon_factory, script, shown, ran, errors):
    """Whether a line is an expression, and whether a block is complete, is
    found by sandboxctl's own parser: the daemon's logs and its
    sandboxd_executions_total count the chunks the user ran (and the
    session's open), not probes that fail to compile."""
    d = daemon_factory()
    before, _ = executions(d)
    p = run_ctl(("session",), socket_path=d.socket_path, input=script)
    assert p.returncode == 0, err(p)
    assert out(p).split() == shown, (out(p), err(p))
    after, logged = executions(d)
    delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    assert delta == dict({"ok": ran + 1}, **({"syntax_error": errors} if errors else {})), delta
    assert sorted(logged) == sorted(["ok"] * (ran + 1) + ["syntax_error"] * errors), logged
