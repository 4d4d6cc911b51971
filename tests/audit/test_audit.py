"""The syscall audit: no chunk of any suite makes a system call outside the
worker's allowlist (docs/security.md, "The syscall audit").

Runs against the audit build only (make test-audit: SANDBOXD_BIN is
build/audit/sandboxd, built with -DSANDBOXD_SYSCALL_AUDIT=1 and the test
hooks).  The corpus and how it is replayed: replay.py.  The canary tests
prove, on every run, that this build reports a forbidden call and lets the
chunk go on, and that a forbidden call in the corpus fails the replay with
the chunk that made it; only then is the corpus's result worth anything.
"""

import json
import os
import subprocess

import pytest

import replay

AUDIT = b"sigsys_audit"


@pytest.fixture(scope="module")
def daemon():
    d = replay.start_daemon()
    yield d
    d.stop_and_check()


def _one(code, name="canary"):
    """A connection of one execute that ended by itself in its suite."""
    return [(name, [{"c": name, "id": 1, "m": "execute", "p": {"code": code},
                     "kind": None, "opened": None}])]


def test_this_is_the_audit_build_and_production_is_not():
    def has_audit(path):
        out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
        return any(line.endswith(" sigsys_audit") for line in out.splitlines())

    assert has_audit(replay.launch.SANDBOXD_BIN), "SANDBOXD_BIN is not the audit build"
    prod = os.path.join(replay.REPO, "build", "sandboxd")
    if os.path.exists(prod):
        assert not has_audit(prod), "the production build has the audit handler"


def test_a_forbidden_call_is_reported_and_the_chunk_goes_on(daemon):
    """sysinfo (99) through the test hook: logged by number and name, failed
    with ENOSYS (the hook returns -1), and the chunk runs to its end."""
    log = replay.Log(daemon)
    with replay.sbx.Client(daemon.socket_path) as c:
        r = c.execute("local a = sandboxd_test.syscall(99) "
                      "local b = sandboxd_test.syscall(41) return a, b, 'after'")
        assert r.ok, r
        assert r.result["value"] == [-1, -1, "after"]
    assert log.since() == [(99, "sysinfo")]   # the first call of a worker is logged


def test_the_replay_names_the_chunk_of_a_forbidden_call(daemon):
    conns = _one("return 1", "quiet") + _one(
        "local x = 0 for i = 1, 10 do x = x + i end sandboxd_test.syscall(41) return x", "loud")
    findings, lost, requests = replay.replay(daemon.socket_path, daemon, conns)
    assert requests == 2 and not lost
    assert [(nr, name, conn) for nr, name, conn, _ in findings] == [(41, "socket", "loud")]
    assert "sandboxd_test.syscall(41)" in findings[0][3]


def test_sessions_are_replayed_with_their_state(daemon, tmp_path):
    """A recorded session is opened again and its chunks run in it: the
    second chunk makes its call only if the first one's global is there."""
    rec = tmp_path / "s.jsonl"
    lines = [
        {"c": "1", "id": 1, "m": "session/open", "p": {}},
        {"c": "1", "id": 1, "m": "=answer", "kind": None, "s": "ses-old"},
        {"c": "1", "id": 2, "m": "execute", "p": {"session": "ses-old", "code": "armed = true"}},
        {"c": "1", "id": 3, "m": "execute",
         "p": {"session": "ses-old", "code": "if armed then sandboxd_test.syscall(62) end"}},
        {"c": "1", "id": 4, "m": "session/close", "p": {"session": "ses-old"}},
    ]
    rec.write_text("".join(json.dumps(x) + "\n" for x in lines))
    conns = [c for c in replay.corpus([str(rec)]) if c[0].startswith("s.jsonl")]
    findings, lost, _ = replay.replay(daemon.socket_path, daemon, conns)
    assert not lost
    assert [(nr, name) for nr, name, _, _ in findings] == [(62, "kill")]
    assert "if armed" in findings[0][3]


def test_no_chunk_of_any_suite_makes_a_forbidden_call(daemon):
    conns = replay.corpus()
    recorded = sum(1 for name, _ in conns if ".jsonl:" in name)
    luadiff = sum(1 for name, _ in conns if name.startswith("luadiff:"))
    findings, lost, requests = replay.replay(daemon.socket_path, daemon, conns)
    lines = []
    for nr, name, conn, what in findings:
        lines.append("FORBIDDEN %s (%d) from %s: %s" % (name, nr, conn, what))
    for conn, what, why in lost:
        lines.append("no answer from %s: %s (%s)" % (conn, what, why))
    print("%d requests replayed (%d recorded connections, %d differential programs), "
          "%d forbidden calls" % (requests, recorded, luadiff, len(findings)))
    assert not findings, "\n".join(lines)
    assert not lost, "\n".join(lines)
