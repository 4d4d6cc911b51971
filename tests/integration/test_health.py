"""sandboxctl health, the probe of both Kubernetes manifests (deploy/k8s),
against the real daemon: 0 while it answers and can start workers, 1 with
one line saying why otherwise (cannot connect, no answer, cannot start
workers since when), 2 for a usage error."""

import os
import re
import socket
import time

import sbx
from sbx import SCALE
from test_sandboxctl import run_ctl, out, err


def health(sock, *args):
    return run_ctl(["health"] + list(args), socket_path=sock)


def test_health_is_0_while_workers_can_be_started(daemon):
    p = health(daemon.socket_path)
    assert p.returncode == 0, err(p)
    assert re.fullmatch(r"healthy: the daemon answers and can start workers "
                        r"\(\d+ running or idle, 0 queued\)\n", out(p)), out(p)
    assert err(p) == ""


def test_health_is_1_when_nothing_listens(tmp_path):
    p = health(str(tmp_path / "none.sock"))
    assert p.returncode == 1, (p.returncode, err(p))
    assert "cannot connect to %s" % (tmp_path / "none.sock") in err(p), err(p)
    assert out(p) == ""


def test_health_is_1_when_the_daemon_does_not_answer(tmp_path):
    """A socket that accepts and never answers (a stuck event loop): health
    gives up after --timeout and says so."""
    path = str(tmp_path / "mute.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    try:
        t0 = time.monotonic()
        p = health(path, "--timeout", "300")
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert p.returncode == 1, (p.returncode, err(p))
    assert "no answer from %s within 300 ms" % path in err(p), err(p)
    assert took >= 0.3, took


def test_health_usage_errors_are_2(daemon):
    for args in (["extra"], ["--timeout", "0"], ["--timeout", "soon"], ["-e", "return 1"]):
        p = health(daemon.socket_path, *args)
        assert p.returncode == 2, (args, p.returncode, err(p))
        assert "Try 'sandboxctl --help'" in err(p), err(p)
    p = run_ctl(["ping", "--timeout", "100"], socket_path=daemon.socket_path)
    assert p.returncode == 2 and "applies only to exec, session and health" in err(p), err(p)


def test_health_fails_while_workers_cannot_be_started_then_recovers(daemon_factory):
    """With every zygote killed as it starts, describe says the daemon
    cannot start workers, ping still answers, and health fails saying since
    when; left alone the zygote comes back after its back-off and health
    passes again.  This is what lets Kubernetes restart such a pod."""
    d = daemon_factory(daemon={"pool_size": 1})
    assert health(d.socket_path).returncode == 0

    c = d.client()
    deadline = time.monotonic() + sbx.SAFETY_NET
    while c.call("describe").result["state"]["can_start_workers"]:
        d.kill_zygotes()
        assert time.monotonic() < deadline, d.stderr[-2000:]
        time.sleep(0.005)
    d.kill_zygotes()
    p = health(d.socket_path)
    state = c.call("describe").result["state"]
    assert p.returncode == 1, (out(p), err(p), state)
    m = re.fullmatch(r"sandboxctl: unhealthy: the daemon cannot start workers since "
                     r"(\S+) \(for (\d+) ms, (\d+) failures in a row\)\n", err(p))
    assert m, err(p)
    assert m.group(1) == state["cannot_start_workers_since"], (m.group(1), state)
    assert int(m.group(3)) >= 3, err(p)
    assert out(p) == ""
    assert run_ctl(["ping"], socket_path=d.socket_path).returncode == 0     # ping is blind to it
    # left alone, the zygote comes back after the back-off (at most 5 s)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        p = health(d.socket_path)
        if p.returncode == 0:
            break
        assert p.returncode == 1, (p.returncode, err(p))
        assert time.monotonic() < deadline, (err(p), d.stderr[-2000:])
        time.sleep(0.2 * SCALE)
    assert out(p).startswith("healthy: "), out(p)
    assert c.value("return 'back'") == "back"


def test_both_manifests_probe_with_health():
    """Readiness and liveness run sandboxctl health in the sandboxd container,
    within the probe's timeout; ping would pass while no worker can start."""
    import pytest
    yaml = pytest.importorskip("yaml", reason="python3-yaml not installed")
    k8s = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "k8s")
    names = sorted(n for n in os.listdir(k8s) if n.endswith(".yaml"))
    assert "sidecar.yaml" in names and "daemonset.yaml" in names, names
    for name in names:
        with open(os.path.join(k8s, name)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "DaemonSet")]
        assert len(pods) == 1, name
        sbxd = [c for c in pods[0]["containers"] if c["name"] == "sandboxd"][0]
        for probe in ("readinessProbe", "livenessProbe"):
            p = sbxd[probe]
            cmd = p["exec"]["command"]
            assert cmd[0] == "/usr/bin/sandboxctl" and "health" in cmd, (name, probe, cmd)
            budget = int(cmd[cmd.index("--timeout") + 1])
            assert budget < 1000 * p["timeoutSeconds"], (name, probe, p)
