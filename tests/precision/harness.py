"""The precision suite's machinery: programs, measurements and their caches, the
suite's daemon configuration and the report (tests/precision/README.md).

Environment (set by the Makefile's test-precision target):
  SANDBOXD_BIN         the daemon under test (default: build/sandboxd)
  PRECISION_MEASURE    the measuring harness, measure.c linked with stock
                       liblua5.3 (default: build/precision/measure, built here
                       when missing or older than its sources)
  PRECISION_REMEASURE  "1": measure every program again, ignoring both caches
  PRECISION_UPDATE     "1": write the measurements back to needs.json (the
                       committed cache) as well as to build/precision/
  PRECISION_ONLY       a comma-separated list of program names to run

all_programs() lists the programs, load_needs() gives their measurements
(from the caches, or measured now, two at a time), RESULTS collects each
program's runs and report_lines() turns them into the report.
"""

import concurrent.futures
import glob
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INTEGRATION = os.path.join(REPO, "tests", "integration")
sys.path.insert(0, INTEGRATION)
sys.path.insert(0, HERE)

import variants  # noqa: E402


def _load_integration_conftest():
    """The integration suite's Daemon and config helpers, under a name of
    their own (this directory has its own conftest module)."""
    spec = importlib.util.spec_from_file_location(
        "integration_conftest", os.path.join(INTEGRATION, "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ic = _load_integration_conftest()

BUILD = os.path.join(REPO, "build", "precision")
MEASURE = os.environ.get("PRECISION_MEASURE") or os.path.join(BUILD, "measure")
HARNESS_SOURCES = ["measure.c", "charges.c", "charges.h"]
# sandboxd's charge module, which charges.c links: its rates are part of the need.
CHARGE_SOURCES = ["worker/charge.c", "worker/pattern.c",
                  "worker/charge.h"]
COMMITTED_CACHE = os.path.join(HERE, "needs.json")
LOCAL_CACHE = os.path.join(BUILD, "needs.json")
REPORT = os.path.join(BUILD, "report.md")

# The suite's daemon: room for three executions at once (one program's three
# runs), ceilings above every 2x need, and no CPU or wall limit that a
# legitimate program could meet before the limits under test.
DAEMON_CONFIG = dict(
    daemon={"max_workers": 3, "max_queue": 16, "pool_size": 3,
            "max_message_bytes": 16777216},
    defaults={"timeout_ms": 300000, "max_heap": 256000000, "max_reductions": 4000000000,
              "cpu_ms": 300000},
    ceilings={"timeout_ms": 600000, "max_heap": 1073741824, "max_reductions": 4000000000,
              "cpu_ms": 600000},
)


# ------------------------------------------------------------------ programs

def all_programs():
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "programs", "*.lua"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path)[:-4], f.read()))
    out.extend(variants.variants())
    only = os.environ.get("PRECISION_ONLY")
    if only:
        wanted = set(only.split(","))
        out = [p for p in out if p[0] in wanted]
    return out


# ------------------------------------------------------------------ the harness

def build_measure():
    """Build the harness when it is missing or older than its sources (a
    direct pytest run; the Makefile target builds it first)."""
    srcs = [os.path.join(HERE, s) for s in HARNESS_SOURCES] + \
        [os.path.join(REPO, s) for s in CHARGE_SOURCES]
    if os.path.exists(MEASURE) and all(os.path.getmtime(MEASURE) >= os.path.getmtime(s)
                                       for s in srcs):
        return
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "lua5.3"], check=True,
                           capture_output=True, text=True).stdout.split()
    os.makedirs(os.path.dirname(MEASURE), exist_ok=True)
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-I", REPO, "-o", MEASURE] + [s for s in srcs if s.endswith(".c")]
                   + flags + ["-lm"], check=True)


def harness_key():
    """What a measurement depends on besides the program: the harness's
    sources, the Lua release it runs, and the charge rates it adds."""
    h = hashlib.sha256()
    for path in [os.path.join(HERE, s) for s in HARNESS_SOURCES] + \
            [os.path.join(REPO, s) for s in CHARGE_SOURCES]:
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(subprocess.run([MEASURE, "version"], check=True, capture_output=True).stdout)
    return h.hexdigest()


def program_key(hkey, source):
    return hashlib.sha256((hkey + "\0" + source).encode()).hexdigest()


def measure(name, source):
    path = os.path.join(BUILD, "src", name + ".lua")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    p = subprocess.run([MEASURE, "need", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("stock lua5.3 fails %s uncapped: %s %s" % (name, p.stdout, p.stderr))
    return json.loads(p.stdout)


def _read_cache(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("programs", {})
    except (OSError, ValueError):
        return {}


def _write_cache(path, entries):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"programs": dict(sorted(entries.items()))}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


STALE = []       # programs whose committed measurement does not match its key


def load_needs(programs):
    build_measure()
    hkey = harness_key()
    remeasure = os.environ.get("PRECISION_REMEASURE") == "1"
    committed, local = _read_cache(COMMITTED_CACHE), _read_cache(LOCAL_CACHE)
    needs, missing = {}, []
    for name, source in programs:
        key = program_key(hkey, source)
        hit = None
        for cache in (local, committed):
            e = cache.get(name)
            if e is not None and e.get("key") == key and not remeasure:
                hit = e
                break
        if hit is not None:
            needs[name] = hit
        else:
            missing.append((name, source, key))
        if committed.get(name, {}).get("key") != key:
            STALE.append(name)
    if missing:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futs = {pool.submit(measure, n, s): (n, k) for n, s, k in missing}
            for fut in concurrent.futures.as_completed(futs):
                n, k = futs[fut]
                m = fut.result()
                m["key"] = k
                needs[n] = m
        local.update({n: needs[n] for n, _, _ in missing})
        _write_cache(LOCAL_CACHE, local)
    if os.environ.get("PRECISION_UPDATE") == "1":
        # A selection (PRECISION_ONLY) updates its programs and keeps the rest.
        keep = committed if os.environ.get("PRECISION_ONLY") else {}
        keep.update({n: needs[n] for n, _ in programs})
        _write_cache(COMMITTED_CACHE, keep)
    return needs


# ------------------------------------------------------------------ the report

RESULTS = {}     # name -> {"needs": measurement, "runs": {label: outcome}}

LABELS = ("2x", "half_heap", "half_reductions")


def _fmt_bytes(n):
    return "%.1f MiB" % (n / 1048576) if n >= 1048576 else "%.1f KiB" % (n / 1024)


def report_lines():
    fp, wrong = [], []
    rows = ["| program | heap need | reductions need | 2x | max_heap / 2 | max_reductions / 2 |",
            "| --- | ---: | ---: | --- | --- | --- |"]
    for name in sorted(RESULTS):
        r = RESULTS[name]
        n, runs = r["needs"], r["runs"]
        cells = []
        for label in LABELS:
            o = runs.get(label)
            cells.append("-" if o is None else o["text"])
            if o is not None and o["false_positive"]:
                fp.append((name, label, o["text"]))
            if o is not None and o["wrong_verdict"]:
                wrong.append((name, label, o["text"]))
        rows.append("| %s | %s | %d | %s |" % (name, _fmt_bytes(n["heap_need"]),
                                               n["reductions_need"], " | ".join(cells)))
    runs = sum(len(r["runs"]) for r in RESULTS.values())
    head = ["Precision suite: %d programs, %d runs: %d false positives, %d wrong verdicts."
            % (len(RESULTS), runs, len(fp), len(wrong)), ""]
    if STALE and os.environ.get("PRECISION_UPDATE") != "1":
        head[1:1] = ["tests/precision/needs.json does not hold the measurements of %d programs "
                     "for this harness, charge module and source (%s%s): they were measured "
                     "now; run the suite with PRECISION_UPDATE=1 and commit needs.json."
                     % (len(STALE), ", ".join(STALE[:5]), ", ..." if len(STALE) > 5 else "")]
    tail = []
    if fp or wrong:
        tail.append("")
    if fp:
        tail.append("False positives (legitimate runs at 2x the needs that did not return "
                    "stock Lua's value):")
        tail += ["- %s: %s" % (name, text) for name, _, text in fp]
    if wrong:
        tail.append("Wrong verdicts (a run at half of one need that did not end with that "
                    "limit's kind):")
        tail += ["- %s, %s: %s" % (name, label, text) for name, label, text in wrong]
    return head + rows + tail
