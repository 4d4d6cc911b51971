"""replay.py - run a corpus of chunks through the syscall-audit daemon and
say which ones made a system call outside the worker's allowlist.

The audit build (make test-audit: -DSANDBOXD_SYSCALL_AUDIT=1, never
installed) reports a forbidden call the way every build does, as a
CHAN_SYSCALL frame the supervisor logs ("worker N: forbidden system call NR
(NAME), as reported by the worker"), but then lets the call fail with ENOSYS
and the chunk go on (policy/contain.c, sigsys_audit).  So a chunk that
would have crashed in production runs to its end here, and the log names
the call.

The corpus:
  * what the integration suite sent (build/chunks/*.jsonl, written by
    tests/integration/sbx.py under SANDBOXD_RECORD_CHUNKS):
    replayed connection by connection, in order, with the sessions a
    recording opened opened again and every tool call answered with null;
  * every *.lua file of the tree (the attack corpus with its header's limits,
    tools and timeout; the precision programs; the bench chunks) and the
    precision suite's generated programs (tests/precision/variants.py),
    each once, unless the recording already holds its code;
  * the differential test's generated programs (AUDIT_LUADIFF: the
    test_luadiff binary), each a session of one chunk a statement.
Exact duplicates are sent once.  Every wall clock is capped: the audit asks
which calls a chunk makes, not how long it may run.  A chunk that did not end
by itself in its suite (its recorded answer, ENDED; an attack's `expect`
header) gets SHORT_MS, enough to run the same loop many times over; any
other one its suite's own timeout up to LONG_MS, so it reaches its end as it
did there.

Two passes: the corpus over CONNECTIONS connections at once; then, only if
the log named a call, every connection again, alone and request by request,
to name the chunk that made it.  As a program (SANDBOXD_BIN the audit
build): replay.py prints each finding and exits 1 if there is one.
"""

import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "precision"))

import launch  # noqa: E402
import sbx  # noqa: E402
import variants  # noqa: E402  (tests/precision: the generated programs)

RECORDINGS = os.environ.get("AUDIT_RECORDINGS") or os.path.join(REPO, "build", "chunks")
LUADIFF = os.environ.get("AUDIT_LUADIFF")  # build/tests/test_luadiff, if given
LUADIFF_BUDGET = 1000000    # tests/diff/luadiff.h: reductions per statement
SHORT_MS = 300              # the wall clock of a chunk that did not end by itself in its suite
LONG_MS = 2000              # and of one that did
# How a chunk ends by itself: a result (None) or one of these errors.  Any
# other answer (timeout, cpu_limit, crashed, cancelled, tool_aborted, none)
# means its suite stopped it, usually in a loop meant to run until then.
ENDED = (None, "runtime_error", "syntax_error", "memory_limit", "reductions_limit",
         "bindings_too_large", "code_too_large", "tool_call_limit", "invalid_params",
         "limit_out_of_range")
CONNECTIONS = 2
ANSWER_WAIT = 60.0          # a safety net: every chunk ends within LONG_MS
FORBIDDEN = re.compile(r"worker (\d+): forbidden system call (-?\d+) \(([^)]*)\)")

# The audit daemon: room for what the suites asked (their ceilings), wall
# clocks short, sessions as many as a recording opens.
CONFIG = {
    "daemon": {"max_workers": 4, "max_queue": 256, "pool_size": 0,
               "max_message_bytes": 16777216, "max_code_bytes": 1048576,
               "max_sessions": 64, "max_sessions_per_connection": 16,
               "log_level": "info"},
    "defaults": {"timeout_ms": LONG_MS, "max_heap": 256000000,
                 "max_reductions": 4000000000, "cpu_ms": LONG_MS,
                 "max_output_bytes": 16777216, "max_bindings_bytes": 100000000},
    "ceilings": {"timeout_ms": LONG_MS, "max_heap": 1073741824,
                 "max_reductions": "infinity", "cpu_ms": "infinity",
                 "priority": "high", "max_output_bytes": 16777216,
                 "max_bindings_bytes": 100000000},
}


# ------------------------------------------------------------------ corpus

def _within(v, cap):
    """A timeout_ms or cpu_ms value held to cap (invalid ones kept: the
    daemon refuses them as the suite's test meant it to)."""
    if v == "infinity" or (isinstance(v, int) and not isinstance(v, bool) and v > cap):
        return cap
    return v


def _capped(params, cap):
    """params with every wall clock and CPU limit within cap ms."""
    p = dict(params)
    p["timeout_ms"] = _within(p.get("timeout_ms", cap), cap)
    lim = p.get("limits")
    if isinstance(lim, dict):
        lim = dict(lim)
        for k in ("timeout_ms", "cpu_ms"):
            if k in lim:
                lim[k] = _within(lim[k], cap)
        p["limits"] = lim
    return p


def load_recordings(paths):
    """The recorded connections: [(name, [record, ...])] in first-seen order."""
    conns = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue        # a line cut by a suite killed mid-write
                key = "%s:%s" % (os.path.basename(path), r.get("c"))
                conns.setdefault(key, []).append(r)
    return list(conns.items())


def _header(source):
    """The `-- key: value` lines at the top of an attack file."""
    h = {}
    for line in source.splitlines():
        m = re.match(r"--\s*([a-z_]+):\s*(.*)$", line)
        if not m:
            break
        h.setdefault(m.group(1), m.group(2).strip())
    return h


def lua_files():
    """Every *.lua file of the tree, as one-request connections."""
    out = []
    skip = {"build", "node_modules", ".git", "_build", "deps"}
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(files):
            if not name.endswith(".lua"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                source = f.read()
            h = _header(source)
            params = {"code": source}
            try:
                if "limits" in h:
                    params["limits"] = json.loads(h["limits"])
                if "tools" in h:
                    params["tools"] = json.loads(h["tools"])
            except ValueError:
                pass
            if "timeout_ms" in h and h["timeout_ms"].isdigit():
                params["timeout_ms"] = int(h["timeout_ms"])
            rel = os.path.relpath(path, REPO)
            expect = h.get("expect", "")
            kind = "timeout" if "timeout" in expect or "cpu_limit" in expect else None
            out.append((rel, [{"c": rel, "id": 1, "m": "execute", "p": params},
                              {"c": rel, "id": 1, "m": "=answer", "kind": kind}]))
    return out


def luadiff_programs(binary=None):
    """The differential test's programs (tests/diff/luadiff.h) as sessions:
    its prelude, then each statement as a chunk of its own with the test's
    budget, as the test runs them in the worker's environment.  The
    statements are what test_luadiff prints under LUADIFF_TRACE; each
    program begins with the prelude."""
    binary = binary or LUADIFF
    if not binary:
        return []
    out = subprocess.run([binary], env=dict(os.environ, LUADIFF_TRACE="1"),
                         capture_output=True, timeout=600)
    text = out.stderr.decode("utf-8", "surrogateescape")
    stmts = [t for t in ("\n" + text).split("\nstmt: ")[1:]]
    programs, prelude = [], stmts[0] if stmts else None
    for st in stmts:
        if st == prelude:
            programs.append([])
        programs[-1].append(st)
    conns = []
    for n, prog in enumerate(programs, 1):
        name = "luadiff:%d" % n
        recs = [{"c": name, "id": 0, "m": "session/open", "p": {}, "kind": None,
                 "opened": "ses"}]
        for i, st in enumerate(prog, 1):
            recs.append({"c": name, "id": i, "m": "execute", "kind": None, "opened": None,
                         "p": {"session": "ses", "code": st,
                               "limits": {"max_reductions": LUADIFF_BUDGET}}})
        recs.append({"c": name, "id": len(prog) + 1, "m": "session/close",
                     "p": {"session": "ses"}, "kind": None, "opened": None})
        conns.append((name, recs))
    return conns


def corpus(recording_paths=None):
    """The connections to replay: the recordings, then the .lua files whose
    code they do not hold; exact duplicate stand-alone requests dropped."""
    if recording_paths is None:
        recording_paths = sorted(glob.glob(os.path.join(RECORDINGS, "*.jsonl")))
    conns = load_recordings(recording_paths)
    seen_code = set()
    for _, recs in conns:
        for r in recs:
            if isinstance(r.get("p"), dict) and isinstance(r["p"].get("code"), str):
                seen_code.add(r["p"]["code"])
    files = lua_files() + [("tests/precision/variants.py:" + name,
                            [{"c": name, "id": 1, "m": "execute", "p": {"code": source}},
                             {"c": name, "id": 1, "m": "=answer", "kind": None}])
                           for name, source in variants.variants()]
    conns += [c for c in files if c[1][0]["p"]["code"] not in seen_code]
    out, seen = [], set()
    for name, recs in conns:
        recs = _prepare(recs)
        stateless = all(r["m"] in ("execute", "check") and
                        not (isinstance(r.get("p"), dict) and "session" in r["p"])
                        for r in recs)
        if stateless:               # one request a connection: dedupe request by request
            for r in recs:
                k = json.dumps([r["m"], r.get("p")], sort_keys=True)
                if k not in seen:
                    seen.add(k)
                    out.append((name, [r]))
        else:
            out.append((name, recs))
    return out + luadiff_programs()


# ------------------------------------------------------------------ replay

def _send(c, rec, sessions):
    """Send one request record and wait for its answer; False when it is not
    sent (a session that did not open here)."""
    m, p = rec["m"], rec.get("p")
    if m == "execute" and isinstance(p, dict):
        p = _capped(p, LONG_MS if rec["kind"] in ENDED else SHORT_MS)
    if isinstance(p, dict):
        if isinstance(p.get("session"), str):       # else sent as the test sent it
            if p["session"] not in sessions:
                return False
            p["session"] = sessions[p["session"]]
    r = c.call(m, p, timeout=ANSWER_WAIT)
    if m == "session/open" and r.ok and isinstance(r.result, dict):
        old = rec.get("opened")
        if old is not None:
            sessions[old] = r.result.get("session")
    return True


def _prepare(recs):
    """The requests of a connection, each with the kind its recorded answer
    had ("kind": an error kind, None for a result, "unanswered") and, for a
    session/open, the session it opened ("opened")."""
    answers = {json.dumps(r.get("id")): r for r in recs if r["m"] == "=answer"}
    out = []
    for r in recs:
        if r["m"] == "=answer":
            continue
        a = answers.get(json.dumps(r.get("id")))
        r = dict(r, kind=a["kind"] if a else "unanswered", opened=a.get("s") if a else None)
        out.append(r)
    return out


def run_connection(socket_path, recs, after_each=None):
    """Replay one connection's requests (from corpus()).  after_each(record)
    runs after each answer.  Returns the records that got no answer here but
    had one in their suite (the connection is then dropped; one that had
    none there, a test's deliberate hang-up, ends it quietly)."""
    lost = []
    sessions = {}
    c = sbx.Client(socket_path, timeout=ANSWER_WAIT)
    c.default_handlers = lambda call: None      # every tool answers null
    try:
        for rec in recs:
            try:
                if not _send(c, rec, sessions):
                    continue
            except (AssertionError, OSError) as e:     # sbx's timeouts, EOF, violations
                if rec.get("kind") != "unanswered":
                    lost.append((rec, str(e)[:200]))
                break
            if after_each:
                after_each(rec)
    finally:
        c.close()
    return lost


class Log:
    """The forbidden calls the daemon logged after a point."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.mark()

    def mark(self):
        self.at = len(self.daemon.stderr)

    def since(self):
        text = self.daemon.stderr[self.at:]
        return [(int(nr), name) for _, nr, name in FORBIDDEN.findall(text)]


def describe(rec):
    p = rec.get("p") if isinstance(rec.get("p"), dict) else {}
    code = p.get("code") if isinstance(p.get("code"), str) else json.dumps(p.get("code"))
    return "%s %s" % (rec["m"], json.dumps(code[:300] + ("..." if len(code) > 300 else "")))


def replay(socket_path, daemon, conns, connections=CONNECTIONS, progress=None):
    """Run conns (from corpus()) and return (findings, lost, requests):
    findings [(syscall nr, name, connection name, record description)],
    lost [(connection name, record description, why)]."""
    log = Log(daemon)
    lost, requests = [], [0]
    lock = threading.Lock()

    def one(item):
        name, recs = item
        for rec, why in run_connection(socket_path, recs):
            with lock:
                lost.append((name, describe(rec), why))
        with lock:
            requests[0] += len(recs)
            if progress:
                progress(requests[0])

    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        list(pool.map(one, conns))
    calls = log.since()
    if not calls:
        return [], lost, requests[0]
    # The second pass: each connection alone, request by request.
    findings = []
    for name, recs in conns:
        log.mark()

        def check(rec, _name=name):
            for nr, sysname in log.since():
                findings.append((nr, sysname, _name, describe(rec)))
            log.mark()
        run_connection(socket_path, recs, after_each=check)
    if not findings:                # a call no request repeats alone
        findings = [(nr, sysname, "(not repeated alone)", "") for nr, sysname in calls]
    return findings, lost, requests[0]


def start_daemon():
    d = launch.Daemon(CONFIG)
    d.start()
    return d


def report(findings, lost, requests, out=sys.stdout):
    for nr, name, conn, what in findings:
        print("FORBIDDEN %s (%d) from %s: %s" % (name, nr, conn, what), file=out)
    for conn, what, why in lost:
        print("no answer from %s: %s (%s)" % (conn, what, why), file=out)
    print("%d requests replayed, %d forbidden system calls" % (requests, len(findings)),
          file=out)


def main():
    conns = corpus()
    d = start_daemon()
    try:
        findings, lost, requests = replay(d.socket_path, d, conns)
    finally:
        d.stop_and_check()
    report(findings, lost, requests)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
