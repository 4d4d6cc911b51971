"""The bench smoke run where bubblewrap cannot create its namespaces (no
user namespaces for it, as in some containers and CI runners): the
bubblewrap baseline is skipped with a line saying why, the run passes."""
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "bench")
SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd")


def no_userns(argv):
    """argv in a user namespace with no uid mapped: there no process may
    create a user namespace, which is exactly what bwrap then reports."""
    return ["unshare", "--user"] + argv


@pytest.fixture(scope="module")
def unmapped():
    if not os.access("/usr/bin/bwrap", os.X_OK) or not os.access("/usr/bin/lua5.3", os.X_OK):
        pytest.skip("no bwrap or lua5.3: the baseline is skipped as not installed")
    if subprocess.run(no_userns(["true"]), capture_output=True).returncode != 0:
        pytest.skip("no user namespaces here: the bench smoke stage itself runs without bwrap")
    p = subprocess.run(no_userns([os.path.join(BENCH, "loadgen"), "spawn-latency", "-b", "-n", "1"]),
                       capture_output=True, text=True)
    assert p.returncode != 0 and "bwrap: No permissions to create new namespace" in p.stderr, \
        "bwrap still runs without user namespaces: %s" % p.stderr


def test_bench_smoke_skips_bwrap_saying_why(unmapped):
    p = subprocess.run(no_userns([os.path.join(BENCH, "run"), "--smoke", "--sandboxd", SANDBOXD_BIN]),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("bench: the bubblewrap baseline is skipped (bwrap cannot run here: bwrap: No "
            "permissions to create new namespace") in p.stdout, p.stdout
    rows = [ln for ln in p.stdout.splitlines() if "bwrap" in ln and "n/a" in ln]
    assert rows and all("n/a (bwrap cannot run here)" in ln for ln in rows), rows
