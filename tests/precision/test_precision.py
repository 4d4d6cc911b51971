"""The precision suite: every program under sandboxd at twice its needs and
at half of each need in turn (tests/precision/README.md).

  2x               max_heap = 2 * heap need, max_reductions = 2 * reductions
                   need: must complete with stock Lua's value.
  half_heap        max_heap = heap need / 2, max_reductions = 2 * reductions
                   need: must end with memory_limit (or the string cap's
                   "resulting string too large", which max_heap sets).
  half_reductions  max_heap = 2 * heap need, max_reductions = reductions
                   need / 2: must end with reductions_limit.

A 2x run that does not return stock Lua's value is a false positive; a half
run that ends otherwise than with the halved limit's kind (another limit's
kind, another error, or a value) is a wrong verdict.
"""

import json
import os

import pytest

import harness as pc

STRING_CAP = "resulting string too large"


def _same(a, b):
    """JSON values equal, integer and float told apart (1 is not 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _limits(heap, reductions):
    return {"max_heap": max(1, int(heap)), "max_reductions": int(reductions)}


def _outcome(resp, expect, want_value, need):
    """What one run ended with, and whether that is right."""
    stats = (resp.result or {}).get("stats") if resp.ok else (resp.data or {}).get("stats")
    billed = ""
    if stats and need["reductions_need"]:
        billed = " (%d reductions, %.2fx the need)" % (
            stats.get("reductions", 0), stats.get("reductions", 0) / need["reductions_need"])
    if resp.ok:
        got = "value" if _same(resp.result["value"], want_value) else "wrong value"
        detail = "" if got == "value" else ": %s" % json.dumps(resp.result["value"])[:200]
    else:
        got = resp.kind
        if got == "runtime_error" and STRING_CAP in (resp.message or ""):
            got = "string cap"
        limit = got.endswith("_limit") or got == "string cap"
        detail = "" if got == expect or limit else ": %s" % (resp.message or "")[:200]
    right = got == expect or (expect == "memory_limit" and got == "string cap")
    return {"kind": got, "right": right, "text": got + billed + detail,
            "false_positive": expect == "value" and not right,
            "wrong_verdict": expect != "value" and not right}


def _check_measurement(name, need):
    assert need["completes_at_double"], (
        "%s: stock lua5.3 does not complete at twice its own heap need: the need is not a "
        "threshold for this program (%r)" % (name, need))
    assert not need["completes_at_half"], (
        "%s: stock lua5.3 completes at half its heap need: the bisection went wrong (%r)"
        % (name, need))


def pytest_generate_tests(metafunc):
    if "program" in metafunc.fixturenames:
        progs = pc.all_programs()
        metafunc.parametrize("program", progs, ids=[p[0] for p in progs])


def test_suite_size():
    assert len(pc.all_programs()) >= 50 or os.environ.get("PRECISION_ONLY")


def test_program(program, needs, daemon):
    name, source = program
    need = needs[name]
    _check_measurement(name, need)
    want = need["value"]
    H, B = need["heap_need"], need["reductions_need"]
    runs = {
        "2x": (_limits(2 * H, 2 * B), "value"),
        "half_heap": (_limits(H // 2, 2 * B), "memory_limit"),
        "half_reductions": (_limits(2 * H, B // 2), "reductions_limit"),
    }
    with daemon.client(timeout=600) as c:
        ids = {label: c.send_execute(source, limits=lim, timeout_ms=300000)
               for label, (lim, _) in runs.items()}
        outcomes = {}
        for label, (lim, expect) in runs.items():
            resp = c.wait(ids[label], timeout=600)
            outcomes[label] = _outcome(resp, expect, want, need)
    pc.RESULTS[name] = {"needs": need, "runs": outcomes}
    bad = ["%s (limits %s): %s" % (label, runs[label][0], o["text"])
           for label, o in outcomes.items() if not o["right"]]
    assert not bad, "%s (heap need %d, reductions need %d):\n  %s" % (
        name, H, B, "\n  ".join(bad))
