"""The `metrics` method and `sandboxctl metrics`: Prometheus text exposition
format 0.0.4, checked with a parser of the test's own (the format is small
and stable: https://prometheus.io/docs/instrumenting/exposition_formats/).

The parser checks each line's shape, one HELP and one TYPE per family before
its samples, label syntax, sample values, histogram buckets (cumulative, in
increasing `le`, ending in +Inf equal to _count, with _sum), and the test then
checks counters are monotonic across two scrapes with executions between.
"""

import math
import os
import re
import signal
import socket
import subprocess
import time

import pytest

import sbx
from conftest import SANDBOXCTL_BIN

SCALE = sbx.SCALE

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE_RE = re.compile(r"^(%s)(\{(?:%s)(?:,(?:%s))*\})? (\S+)(?: (-?\d+))?$" % (NAME, LABEL, LABEL))
HELP_RE = re.compile(r"^# HELP (%s) (.*)$" % NAME)
TYPE_RE = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % NAME)
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse_value(text):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    assert re.match(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$", text), "bad value %r" % text
    return float(text)


def parse(text):
    """{family: {"type", "help", "samples": [(name, {labels}, value)]}};
    raises AssertionError on anything the format does not allow."""
    assert text.endswith("\n"), "the text must end with a newline"
    families, current = {}, None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d: %r" % (n, line)
        if line.startswith("#"):
            m = HELP_RE.match(line) or TYPE_RE.match(line)
            assert m, "bad comment line, " + where
            fam = families.setdefault(m.group(1), {"type": None, "help": None, "samples": []})
            key = "help" if line.startswith("# HELP") else "type"
            assert fam[key] is None, "second %s for %s, %s" % (key.upper(), m.group(1), where)
            assert not fam["samples"], "%s after samples, %s" % (key.upper(), where)
            fam[key] = m.group(2)
            current = m.group(1)
            continue
        m = SAMPLE_RE.match(line)
        assert m, "bad sample line, " + where
        name, labels, value = m.group(1), m.group(2), parse_value(m.group(3))
        fam = families.get(current)
        assert fam and fam["type"], "sample before its family's TYPE, " + where
        suffixes = ("_bucket", "_sum", "_count") if fam["type"] == "histogram" else ("",)
        assert any(name == current + s for s in suffixes), \
            "sample %s outside its family %s, %s" % (name, current, where)
        lab = dict(LABEL_RE.findall(labels or ""))
        fam["samples"].append((name, lab, value))
    for name, fam in families.items():
        assert fam["help"] is not None and fam["type"] is not None, "%s lacks HELP or TYPE" % name
        assert fam["samples"], "%s has no samples" % name
        if fam["type"] == "counter":
            assert name.endswith("_total"), "counter %s does not end in _total" % name
            assert all(v >= 0 and v == int(v) for _, _, v in fam["samples"]), name
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    buckets = [(s[1]["le"], s[2]) for s in samples if s[0] == name + "_bucket"]
    sums = [s[2] for s in samples if s[0] == name + "_sum"]
    counts = [s[2] for s in samples if s[0] == name + "_count"]
    assert buckets and len(sums) == 1 and len(counts) == 1, (name, samples)
    assert buckets[-1][0] == "+Inf", "%s: the last bucket is le=%r" % (name, buckets[-1][0])
    bounds = [parse_value(b) for b, _ in buckets]
    assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds), (name, bounds)
    values = [v for _, v in buckets]
    assert values == sorted(values), "%s: buckets are not cumulative: %r" % (name, values)
    assert values[-1] == counts[0], "%s: +Inf bucket %r != _count %r" % (name, values[-1], counts[0])
    assert sums[0] >= 0 and not math.isnan(sums[0]), (name, sums)


def value(fams, family, name=None, **labels):
    for n, lab, v in fams[family]["samples"]:
        if n == (name or family) and lab == labels:
            return v
    raise AssertionError("no sample %s%r in %s" % (name or family, labels, family))


def scrape(client):
    r = client.call("metrics")
    assert r.ok, r
    assert r.result["content_type"] == "text/plain; version=0.0.4", r.result
    return parse(r.result["text"])


def counters(fams):
    """{(sample name, sorted labels): value} of every counter and histogram sample."""
    out = {}
    for fam in fams.values():
        if fam["type"] in ("counter", "histogram"):
            for n, lab, v in fam["samples"]:
                out[(n, tuple(sorted(lab.items())))] = v
    return out


def test_parser_rejects_what_the_format_forbids():
    """The parser is the test's instrument: it must fail on bad text."""
    good = "# HELP a_total x\n# TYPE a_total counter\na_total 1\n"
    parse(good)
    for bad in (good[:-1],                                          # no final newline
                good + "a_total{kind=oops} 1\n",                    # unquoted label
                "# TYPE a gauge\na 1\n",                            # no HELP
                "# HELP b_total x\n# TYPE b_total counter\nc_total 1\n",     # foreign sample
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                "h_sum 1\nh_count 1\n",                             # not cumulative
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
                "# HELP g x\n# TYPE g gauge\ng one\n"):                # not a number
        with pytest.raises(AssertionError):
            parse(bad)


def test_metrics_format_and_counters(daemon_factory):
    d = daemon_factory(daemon={"pool_size": 1})
    c = d.client()
    assert "metrics" in c.call("describe").result["methods"]
    first = scrape(c)
    for fam in ("sandboxd_executions_total", "sandboxd_execution_duration_seconds",
                "sandboxd_queue_wait_seconds", "sandboxd_tool_calls_total",
                "sandboxd_workers_started_total", "sandboxd_workers", "sandboxd_idle_workers",
                "sandboxd_queued_executions", "sandboxd_connections", "sandboxd_sessions",
                "sandboxd_input_buffer_bytes", "sandboxd_output_buffer_bytes",
                "sandboxd_zygote_restarts_total", "sandboxd_refused_peers_total",
                "sandboxd_handovers_lost_total", "sandboxd_can_start_workers", "sandboxd_cannot_start_workers_since_seconds",
                "sandboxd_worker_start_failures", "process_resident_memory_bytes"):
        assert fam in first, "no family %s" % fam
    assert value(first, "sandboxd_connections") >= 1
    assert value(first, "sandboxd_sessions") == 0
    assert value(first, "process_resident_memory_bytes") > 0
    for kind in ("ok", "timeout", "crashed", "disconnected", "busy"):
        value(first, "sandboxd_executions_total", kind=kind)       # there, even at 0

    # executions of several kinds, a tool call, a disconnect, a zygote death
    assert c.value("return 1") == 1
    assert c.execute("error('x')").kind == "runtime_error"
    assert c.execute("while true do end", timeout_ms=200).kind == "timeout"
    r = c.execute("return T.f(1)", tools=[{"name": "T", "functions": ["f"]}],
                  handlers={"T.f": lambda a: a[0]})
    assert r.ok, r
    gone = d.client()
    gone.send_raw(b'{"jsonrpc":"2.0","id":"g","method":"execute","params":'
                  b'{"code":"while true do end"}}\n')
    d.wait_for_workers(1)
    time.sleep(0.2)
    gone.close()
    d.wait_log(r'id="g" op=execute outcome=disconnected')
    zyg = d.zygotes()[0][0]
    os.kill(zyg, signal.SIGKILL)
    d.wait_log(r"zygote died")
    assert c.value("return 2", timeout=20 * SCALE) == 2     # served by the new zygote
    # a partial message holds input buffer memory; an answer a client does
    # not read holds output buffer memory
    part = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    part.connect(d.socket_path)
    part.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 200000)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(d.socket_path)
    slow.sendall(b'{"jsonrpc":"2.0","id":1,"method":"execute","params":'
                 b'{"code":"return string.rep(\'x\', 900000)"}}\n')
    try:
        deadline = time.monotonic() + sbx.SAFETY_NET
        while True:
            second = scrape(c)
            if value(second, "sandboxd_input_buffer_bytes") >= 200000 and \
                    value(second, "sandboxd_output_buffer_bytes") >= 500000 or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        part.close()
        slow.close()
    assert value(second, "sandboxd_input_buffer_bytes") >= 200000
    assert value(second, "sandboxd_output_buffer_bytes") >= 500000

    before, after = counters(first), counters(second)
    for key, v in before.items():
        assert after[key] >= v, "counter %s went from %r to %r" % (key, v, after[key])
    ex = "sandboxd_executions_total"
    for kind, n in (("ok", 4), ("runtime_error", 1), ("timeout", 1), ("disconnected", 1)):
        assert value(second, ex, kind=kind) - value(first, ex, kind=kind) == n, kind
    assert value(second, "sandboxd_tool_calls_total") - value(first, "sandboxd_tool_calls_total") == 1
    assert value(second, "sandboxd_zygote_restarts_total") == \
        value(first, "sandboxd_zygote_restarts_total") + 1
    assert value(second, "sandboxd_workers_started_total") >= \
        value(first, "sandboxd_workers_started_total") + 5
    dur = "sandboxd_execution_duration_seconds"
    assert value(second, dur, dur + "_count") - value(first, dur, dur + "_count") == 7
    # the timeout ran for at least its 200 ms
    assert value(second, dur, dur + "_sum") - value(first, dur, dur + "_sum") >= 0.2
    assert value(second, dur, dur + "_bucket", le="0.1") - \
        value(first, dur, dur + "_bucket", le="0.1") <= 5


def test_sandboxctl_metrics_prints_the_text(daemon):
    p = subprocess.run([SANDBOXCTL_BIN, "-s", daemon.socket_path, "metrics"], capture_output=True,
                       text=True, timeout=30 * SCALE, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    fams = parse(p.stdout)
    assert "sandboxd_executions_total" in fams
    assert p.stdout.startswith("# HELP "), p.stdout[:200]


def test_sessions_gauge_and_session_chunks(daemon_factory):
    """An open session counts in sandboxd_sessions until it is closed; its
    opening and its chunks are executions (by kind, as their log lines), and
    the chunks waited for no worker."""
    d = daemon_factory()
    c = d.client()
    first = scrape(c)
    assert value(first, "sandboxd_sessions") == 0
    r = c.call("session/open", {})
    assert r.ok, r
    sid = r.result["session"]
    time.sleep(0.3)             # the chunks' wait must not include the session's age
    for _ in range(3):
        r = c.call("execute", {"session": sid, "code": "return 1"})
        assert r.ok, r
    mid = scrape(c)
    assert value(mid, "sandboxd_sessions") == 1
    ex, wait = "sandboxd_executions_total", "sandboxd_queue_wait_seconds"
    assert value(mid, ex, kind="ok") - value(first, ex, kind="ok") == 4
    assert value(mid, wait, wait + "_bucket", le="0.25") - \
        value(first, wait, wait + "_bucket", le="0.25") >= 3
    assert c.call("session/close", {"session": sid}).ok
    deadline = time.monotonic() + sbx.SAFETY_NET
    while value(scrape(c), "sandboxd_sessions") != 0:
        assert time.monotonic() < deadline, "the closed session is still counted"
        time.sleep(0.05)
