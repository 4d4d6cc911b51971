"""The attack corpus (tests/attacks/*.lua) through the real daemon.

Each file is one attack with its expected (safe) outcome in a header of
`-- key: value` comment lines at the top of the file:

  expect:            ok | error KIND[|KIND...]   (required)
  why:               one line: what the attack tries and what must happen (required)
  value:             JSON: the result value must equal it exactly (1 and 1.0 differ)
  value_contains:    text that must occur in the (JSON-encoded) value
  message_contains:  text that must occur in the error message (repeatable)
  message_max_len:   the error message is at most this long
  output_contains:   text that must occur in the captured output (repeatable)
  output_lacks:      text that must not occur in the captured output (repeatable)
  output_max_len:    the captured output is at most this many bytes
  output_truncated:  true | false
  limits:            JSON object: the execute's limits
  timeout_ms:        the attack's time budget (scaled by sbx.SCALE): the
                     execute's timeout when a timeout is the expected outcome
                     or limits sets cpu_ms to infinity; otherwise the wall
                     clock is only a safety net (at least CPU_BUDGET_WALL_MS),
                     so a loaded machine, which stretches the wall time of the
                     CPU an attack needs, does not change its outcome: where
                     limits sets a finite cpu_ms that is the budget, else
                     timeout_ms is the execute's cpu_ms
  max_wall_ms:       the execution's own CPU time (stats.cpu_us) must stay
                     within this (scaled) time, which a loaded machine does not
                     stretch.  Not for an attack that expects a timeout: only
                     a wall clock answers `timeout` (a CPU limit is
                     `cpu_limit`), so the kind is the proof, and the wait for
                     it a safety net of minutes
  tools:             JSON array: tools for the execute; every function echoes its
                     first argument
  inspect:           checks made from /proc on every worker that runs while the
                     attack does (space-separated): seccomp (filter mode and
                     no_new_privs), fds (only 0-3 open; needs root, the worker is
                     not dumpable), environ (no variable but TZ in the worker's
                     environment block; the daemon runs with a secret in its own).
                     The execute then also gets a tool Inspect.seen() that
                     answers true once a running worker has been inspected: the
                     attack keeps its worker busy until then, so the check does
                     not depend on how fast the machine is

Invariants checked for every file, beyond its header: the answer obeys the
protocol (sbx validates every message), a result's stats.heap_peak_bytes
never exceeds limits.max_heap, and afterwards the daemon answers ping on a
new connection.  In the serial run no worker may be left over after each
file (the daemon runs with pool_size 0); in the parallel run (8 client
threads over the whole corpus) that is checked at the end.

Environment: SANDBOXD_BIN as for every integration test; ATTACKS_ONLY, a
comma-separated list of file name prefixes, narrows the corpus (for
debugging a single attack).
"""

import concurrent.futures
import glob
import json
import os
import re
import threading
import time

import pytest

import sbx
from conftest import Daemon, merge_config

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACK_DIR = os.path.join(os.path.dirname(HERE), "attacks")
SCALE = sbx.SCALE
DEFAULT_TIMEOUT_MS = 10000
# A wall clock limit cannot tell a defence that failed from a machine that is
# busy (a worker at nice 10 gets little of a loaded CPU), so an attack whose
# expected outcome is not a timeout gets its budget as CPU time: a failed
# defence still ends, as cpu_limit (a kind it does not expect), and a slow
# machine only makes it take longer.  The wall clock limit is then this.
# Attacks that must run without any count hook (cpu_ms and max_reductions
# "infinity") can only have a wall clock budget: theirs are generous (a failed
# defence hangs to it; a loaded machine needs far less).
CPU_BUDGET_WALL_MS = 120000
PARALLEL = 8
SECRET_ENV = "SANDBOXD_ATTACK_SECRET"

KNOWN_KEYS = {"expect", "why", "value", "value_contains", "message_contains", "message_max_len",
              "output_contains", "output_lacks", "output_max_len", "output_truncated", "limits",
              "timeout_ms", "max_wall_ms", "tools", "inspect"}
REPEATABLE = {"message_contains", "output_contains", "output_lacks", "value_contains"}
HEADER_RE = re.compile(r"^--\s*([a-z_]+):\s?(.*)$")


class Attack:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        with open(path, "rb") as f:
            self.code = f.read().decode("utf-8")
        h = {}
        for line in self.code.splitlines():
            if not line.startswith("--"):
                break
            m = HEADER_RE.match(line)
            if not m:
                continue
            key, val = m.group(1), m.group(2).strip()
            assert key in KNOWN_KEYS, "%s: unknown header key %r" % (self.name, key)
            if key in REPEATABLE:
                h.setdefault(key, []).append(val)
            else:
                assert key not in h, "%s: header key %r twice" % (self.name, key)
                h[key] = val
        assert "expect" in h and "why" in h, "%s: header needs expect and why" % self.name
        exp = h["expect"].split()
        if exp == ["ok"]:
            self.kinds = None
        else:
            assert len(exp) == 2 and exp[0] == "error", "%s: bad expect %r" % (self.name, h["expect"])
            self.kinds = exp[1].split("|")
            for k in self.kinds:
                assert k in sbx.KIND_CODES, "%s: unknown kind %r" % (self.name, k)
        self.h = h
        self.limits = json.loads(h["limits"]) if "limits" in h else None
        self.tools = json.loads(h["tools"]) if "tools" in h else None
        self.timeout_ms = int(h.get("timeout_ms", DEFAULT_TIMEOUT_MS)) * SCALE
        self.max_wall = int(h["max_wall_ms"]) * SCALE / 1000.0 if "max_wall_ms" in h else None
        assert self.max_wall is None or "timeout" not in (self.kinds or []), \
            "%s: max_wall_ms with expect timeout (the kind is the proof)" % self.name
        self.cpu_budget = not ({"timeout", "cpu_limit"} & set(self.kinds or [])) and \
            "cpu_ms" not in (self.limits or {})
        # the limits' own finite CPU budget bounds the attack: a wall clock
        # timeout could only cut it short on a loaded machine
        self.cpu_bound = "timeout" not in (self.kinds or []) and \
            isinstance((self.limits or {}).get("cpu_ms"), int)
        if "value" in h:
            self.value = json.loads(h["value"])

    def budget(self):
        """(limits, timeout_ms) for the execute."""
        if self.cpu_bound:
            return self.limits, max(self.timeout_ms, CPU_BUDGET_WALL_MS * SCALE)
        if not self.cpu_budget:
            return self.limits, self.timeout_ms
        return dict(self.limits or {}, cpu_ms=self.timeout_ms), CPU_BUDGET_WALL_MS * SCALE

    def __repr__(self):
        return self.name


def load_corpus():
    files = sorted(glob.glob(os.path.join(ATTACK_DIR, "*.lua")))
    only = os.environ.get("ATTACKS_ONLY")
    if only:
        prefixes = [p for p in only.split(",") if p]
        files = [f for f in files if any(os.path.basename(f).startswith(p) for p in prefixes)]
    return [Attack(f) for f in files]


CORPUS = load_corpus()


def strict_equal(a, b):
    """JSON equality that keeps integer, float and boolean apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    return a == b


def echo_handlers(tools):
    """Every tool function answers with its first argument."""
    h = {}
    for t in tools or []:
        for f in t.get("functions", []):
            fname = f if isinstance(f, str) else f["name"]
            h["%s.%s" % (t["name"], fname)] = lambda args: args[0] if args else None
    return h


# ------------------------------------------------------------------ confinement

def _proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def inspect_worker(pid, checks):
    """Problems seen in a running worker's /proc entry (an empty list if none).
    A worker that is gone raises FileNotFoundError."""
    problems = []
    if "seccomp" in checks:
        st = _proc_status(pid)
        if st.get("Seccomp") != "2":
            problems.append("Seccomp: %r (want 2, filter mode)" % st.get("Seccomp"))
        if st.get("NoNewPrivs") != "1":
            problems.append("NoNewPrivs: %r" % st.get("NoNewPrivs"))
    fds = env = None
    if "fds" in checks:
        try:
            fds = sorted(int(x) for x in os.listdir("/proc/%d/fd" % pid))
        except PermissionError:
            pass        # not root: the worker is not dumpable
    if fds is not None and fds != [0, 1, 2, 3]:
        problems.append("open fds %r (want [0, 1, 2, 3])" % fds)
    if "environ" in checks:
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = [e for e in f.read().split(b"\0") if e]
        except PermissionError:
            pass
    if env is not None:
        # /proc/PID/environ is the environment block in the process's own
        # memory: clearenv() empties `environ` but leaves those bytes behind
        extra = [e.decode("utf-8", "replace") for e in env if not e.startswith(b"TZ=")]
        if extra:
            secret = [e for e in extra if e.startswith(SECRET_ENV)]
            problems.append("%d environment variable(s) of the daemon in the worker's memory "
                            "(/proc/%d/environ)%s, e.g. %r" % (
                                len(extra), pid, ", including the secret" if secret else "",
                                (secret or extra)[:3]))
    return problems


def watch_workers(daemon, checks, stop, seen, problems):
    """Inspect every worker that runs until stop is set."""
    while not stop.is_set():
        for pid, comm, state, ticks in daemon.workers():
            # only a worker that has burnt some CPU is known to be past its
            # containment and running Lua
            if pid in seen or state == "Z" or ticks < 10:
                continue
            try:
                p = inspect_worker(pid, checks)
            except (FileNotFoundError, ProcessLookupError):
                continue
            seen.add(pid)
            problems.extend("worker %d: %s" % (pid, x) for x in p)
        time.sleep(0.02)


# ------------------------------------------------------------------ one attack

def run_attack(daemon, client, a):
    """Run one attack; return a list of failure texts (empty: it behaved)."""
    stop = threading.Event()
    seen, problems = set(), []
    watcher = None
    checks = a.h.get("inspect", "").split()
    assert set(checks) <= {"seccomp", "fds", "environ"}, "%s: bad inspect %r" % (a.name, checks)
    tools, handlers = a.tools, echo_handlers(a.tools)
    if checks:
        watcher = threading.Thread(target=watch_workers,
                                   args=(daemon, checks, stop, seen, problems))
        watcher.start()
        tools = (tools or []) + [{"name": "Inspect", "functions": ["seen"]}]
        handlers["Inspect.seen"] = lambda args: bool(seen)
    limits, timeout_ms = a.budget()
    try:        # the wait: the execution's own timeout, then a safety net of minutes
        r = client.execute(a.code, tools=tools, limits=limits, timeout_ms=timeout_ms,
                           handlers=handlers,
                           timeout=timeout_ms / 1000.0 + 120 * SCALE)
    finally:
        stop.set()
        if watcher:
            watcher.join()
    fails = problems[:3]
    if watcher and not seen:
        fails.append("inspect: no running worker was seen")
    return fails + check_response(a, r)


def check_response(a, r):
    fails = []
    h = a.h
    if a.kinds is None:
        if not r.ok:
            return ["expected ok, got error %s: %s (data %s)" % (
                r.kind, r.message[:500], json.dumps(r.data)[:1500])]
        res = r.result
        output, truncated, stats = res.get("output"), res.get("output_truncated"), res.get("stats")
        value = res.get("value")
        if "value" in h and not strict_equal(value, a.value):
            fails.append("value %s, expected %s" % (json.dumps(value)[:1000], h["value"]))
        enc = value if isinstance(value, str) else json.dumps(value)
        for t in h.get("value_contains", []):
            if t not in enc:
                fails.append("value %s lacks %r" % (enc[:1000], t))
    else:
        if r.ok:
            return ["expected error %s, got ok: %s" % ("|".join(a.kinds), r.raw[:1500])]
        if r.kind not in a.kinds:
            fails.append("expected error %s, got %s: %s" % ("|".join(a.kinds), r.kind, r.message[:1000]))
        for t in h.get("message_contains", []):
            if t not in r.message:
                fails.append("message %r lacks %r" % (r.message[:1000], t))
        if "message_max_len" in h and len(r.message) > int(h["message_max_len"]):
            fails.append("message is %d long (max %s)" % (len(r.message), h["message_max_len"]))
        output, truncated, stats = r.data.get("output"), r.data.get("output_truncated"), r.data.get("stats")
    output = output or ""
    for t in h.get("output_contains", []):
        if t not in output:
            fails.append("output %r lacks %r" % (output[:300], t))
    for t in h.get("output_lacks", []):
        if t in output:
            fails.append("output contains %r: %r" % (t, output[:300]))
    if "output_max_len" in h and len(output.encode("utf-8")) > int(h["output_max_len"]):
        fails.append("output is %d bytes (max %s)" % (len(output.encode("utf-8")), h["output_max_len"]))
    if "output_truncated" in h and truncated is not json.loads(h["output_truncated"]):
        fails.append("output_truncated %r, expected %s" % (truncated, h["output_truncated"]))
    max_heap = (a.limits or {}).get("max_heap")
    if isinstance(max_heap, int) and isinstance(stats, dict) and \
            isinstance(stats.get("heap_peak_bytes"), int) and stats["heap_peak_bytes"] > max_heap:
        fails.append("stats.heap_peak_bytes %d exceeds max_heap %d" % (stats["heap_peak_bytes"], max_heap))
    if a.max_wall is not None:
        cpu = stats.get("cpu_us", 0) / 1e6 if isinstance(stats, dict) else 0
        if cpu > a.max_wall:
            fails.append("ran for %.2fs of CPU time (max %.2fs)" % (cpu, a.max_wall))
    return fails


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def attack_daemon():
    """The test config, with infinity allowed for reductions and CPU (so
    attacks can run with no count hook at all) and a secret in the daemon's
    environment that must never reach a worker."""
    cfg = merge_config(ceilings={"max_reductions": "infinity", "cpu_ms": "infinity"})
    old = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = "hunter2"
    try:
        d = Daemon(config=cfg)
        try:
            d.start()
        except BaseException:
            d.cleanup()
            raise
    finally:
        if old is None:
            del os.environ[SECRET_ENV]
        else:
            os.environ[SECRET_ENV] = old
    yield d
    d.stop_and_check()


def test_corpus_is_large_enough():
    if os.environ.get("ATTACKS_ONLY"):
        pytest.skip("ATTACKS_ONLY narrows the corpus")
    assert len(CORPUS) >= 50, "only %d attack files" % len(CORPUS)
    names = [a.name for a in CORPUS]
    assert len(set(n.split("-", 1)[0] for n in names)) == len(names), "duplicate numbers"


@pytest.mark.parametrize("attack", CORPUS, ids=[a.name for a in CORPUS])
def test_attack_serial(attack_daemon, attack):
    c = attack_daemon.client()
    try:
        fails = run_attack(attack_daemon, c, attack)
    finally:
        c.close()
    attack_daemon.assert_alive()
    attack_daemon.assert_no_leftovers()
    assert not fails, "%s (%s):\n  %s" % (attack.name, attack.h["why"], "\n  ".join(fails))


def test_attacks_parallel(attack_daemon):
    if os.environ.get("ATTACKS_ONLY"):
        pytest.skip("ATTACKS_ONLY narrows the corpus")
    run_corpus_parallel(attack_daemon)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start the daemon as nobody")
def test_attacks_parallel_non_root():
    """The whole corpus again against a daemon that is not root (nobody):
    there the worker layers come from a user namespace, not a uid drop."""
    if os.environ.get("ATTACKS_ONLY"):
        pytest.skip("ATTACKS_ONLY narrows the corpus")
    cfg = merge_config(ceilings={"max_reductions": "infinity", "cpu_ms": "infinity"})
    d = Daemon(config=cfg, run_as=(65534, 65534))
    try:
        d.start()
    except BaseException:
        d.cleanup()
        raise
    try:
        assert "not root" in d.stderr, d.stderr
        run_corpus_parallel(d)
    finally:
        d.stop_and_check()


def run_corpus_parallel(attack_daemon):
    local = threading.local()

    def one(a):
        if not hasattr(local, "client"):
            local.client = sbx.Client(attack_daemon.socket_path)
        try:
            fails = run_attack(attack_daemon, local.client, a)
        except AssertionError as e:
            fails = ["%s: %s" % (type(e).__name__, e)]
            local.client.close()
            del local.client
        if not fails:
            try:
                with sbx.Client(attack_daemon.socket_path) as p:
                    p.ping()
            except AssertionError as e:
                fails = ["ping after the attack failed: %s" % e]
        return a, fails

    # the longest attacks first, so the run ends evenly
    order = sorted(CORPUS, key=lambda a: -a.timeout_ms if "timeout" in (a.kinds or []) else 0)
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, order))
    attack_daemon.assert_alive()
    attack_daemon.assert_no_leftovers()
    bad = ["%s: %s" % (a.name, "; ".join(f)) for a, f in results if f]
    assert not bad, "in parallel:\n" + "\n".join(bad)
