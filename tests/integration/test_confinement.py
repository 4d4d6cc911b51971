"""What workers get from a root daemon with the capabilities a container
gives it (deploy/k8s): the sidecar's set, without CAP_SYS_NICE (Pod
Security "baseline") and without CAP_SYS_ADMIN.  The daemon runs under
setpriv with that bounding set, as the container runtime would start it."""

import os
import pwd
import shutil
import stat
import subprocess
import time

import pytest

import sbx
from conftest import SANDBOXD_BIN
from test_lifecycle import start_looping

IS_ROOT = os.geteuid() == 0
# the sidecar's and the DaemonSet's capabilities (deploy/k8s), no SYS_NICE
BASELINE = ["setuid", "setgid", "sys_chroot", "kill", "chown"]


def capped(tmp_path, caps):
    """A wrapper that execs the daemon (same pid) with only caps."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) not installed")
    w = tmp_path / "sandboxd-capped"
    w.write_text("#!/bin/sh\nexec %s --no-new-privs --inh-caps=-all --bounding-set=%s %s \"$@\"\n"
                 % (setpriv, ",".join(["-all"] + ["+" + c for c in caps]), SANDBOXD_BIN))
    w.chmod(0o755)
    return str(w)


def empty_chroot(tmp_path):
    os.chmod(str(tmp_path), 0o755)
    empty = tmp_path / "empty"
    empty.mkdir()
    empty.chmod(0o555)
    return str(empty)


def start_capped(daemon_factory, tmp_path, caps, **sections):
    sections.setdefault("worker", {"user": "nobody", "group": "nogroup",
                                   "chroot": empty_chroot(tmp_path)})
    d = daemon_factory(start=False, **sections)
    d.binary = capped(tmp_path, caps)
    d.start()
    return d


def nice_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def uids_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return [int(x) for x in f.read().split("\nUid:")[1].split("\n")[0].split()]
    except (OSError, IndexError):
        return None


def pooled_worker(d, uid):
    """The pid of the one idle pooled worker, once it runs as uid (its drop
    done: from then on only CAP_SYS_NICE lets the supervisor renice it)."""
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        pids = d.worker_pids()
        if len(pids) == 1 and uids_of(pids[0]) == [uid] * 4:
            return pids[0]
        assert time.monotonic() < deadline, (d.children(), d.stderr[-2000:])
        time.sleep(0.02)


def pooled_worker_nice(c, d, priority, uid):
    """The nice value of the pooled worker once it runs a job at priority."""
    pid = pooled_worker(d, uid)
    i = start_looping(c, d, limits={"priority": priority})
    assert pid in d.worker_pids(), (pid, d.children())
    nice = nice_of(pid)
    c.cancel(i)
    assert c.wait(i).code == -32800
    return nice


@pytest.mark.skipif(not IS_ROOT, reason="a root daemon's capabilities")
def test_priority_applies_without_sys_nice(daemon_factory, tmp_path):
    """Without CAP_SYS_NICE the supervisor cannot renice a worker of another
    uid; the worker lowers its own priority when it takes its job, so each
    priority still reaches it: nice +10, +5 and +0 over the daemon's.  With
    CAP_SYS_ADMIN, so that the workers' namespaces come from unshare alone:
    a user namespace the daemon owns would let it renice them anyway."""
    d = start_capped(daemon_factory, tmp_path, BASELINE + ["sys_admin"],
                     ceilings={"priority": "high"}, daemon={"pool_size": 1})
    assert "namespaces net+ipc+mnt+uts;" in d.stderr, d.stderr
    c = d.client()
    own = nice_of(d.pid)
    nobody = pwd.getpwnam("nobody").pw_uid
    nice = {p: pooled_worker_nice(c, d, p, nobody) for p in ("low", "normal", "high")}
    assert nice == {"low": min(own + 10, 19), "normal": min(own + 5, 19), "high": own}, (nice, own)
    assert "setpriority" not in d.stderr, d.stderr[-2000:]


def status_fields(pid):
    with open("/proc/%d/status" % pid) as f:
        return {k: v.split() for k, v in (line.split(":", 1) for line in f if ":" in line)}


def ns_of(pid, ns):
    return os.readlink("/proc/%d/ns/%s" % (pid, ns))


@pytest.mark.skipif(not IS_ROOT, reason="a root daemon's capabilities")
def test_namespaces_through_a_user_namespace_without_sys_admin(daemon_factory, tmp_path):
    """Without CAP_SYS_ADMIN (a container) unshare alone is refused; where
    user namespaces are allowed the zygote enters one that maps only the
    worker's ids, so workers still get their own network (and ipc, mnt,
    uts) namespace; the zygote keeps exactly the daemon's capabilities, the
    workers none, and the log names why the detour was taken."""
    if subprocess.run(["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=" +
                       ",".join(["-all"] + ["+" + c for c in BASELINE]), "unshare", "-U", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("this host forbids user namespaces without CAP_SYS_ADMIN")
    d = start_capped(daemon_factory, tmp_path, BASELINE, daemon={"pool_size": 1})
    text = d.stderr
    assert "unshare alone is refused (EPERM: the daemon lacks CAP_SYS_ADMIN)" in text, text
    assert "namespaces user+net+ipc+mnt+uts;" in text, text
    c = d.client()
    assert c.value("return os.date('!%Y') == os.date('!%Y', os.time()) and 6 * 7") == 42
    nobody = pwd.getpwnam("nobody").pw_uid
    pid = pooled_worker(d, nobody)
    for ns in ("net", "ipc", "mnt", "uts", "user"):
        assert ns_of(pid, ns) != ns_of(d.pid, ns), ns
    w, own = status_fields(pid), status_fields(d.pid)
    assert w["CapEff"] == w["CapPrm"] == ["0000000000000000"], w
    assert w["Uid"] == [str(nobody)] * 4, w["Uid"]
    zygote = [z[0] for z in d.zygotes()]
    assert len(zygote) == 1, d.children()
    z = status_fields(zygote[0])
    assert ns_of(zygote[0], "net") == ns_of(pid, "net")
    assert z["CapEff"] == own["CapEff"] and z["CapPrm"] == own["CapPrm"], (z, own)
    assert os.listdir("/proc/%d/root" % pid) == []


@pytest.mark.skipif(not IS_ROOT, reason="a root daemon's capabilities")
def test_workers_get_their_own_network_namespace_as_root(daemon_factory, tmp_path):
    """With every capability, workers' namespaces come from unshare alone."""
    d = start_capped(daemon_factory, tmp_path, ["all"], daemon={"pool_size": 1})
    assert "namespaces net+ipc+mnt+uts;" in d.stderr, d.stderr
    pid = pooled_worker(d, pwd.getpwnam("nobody").pw_uid)
    for ns in ("net", "ipc", "mnt", "uts"):
        assert ns_of(pid, ns) != ns_of(d.pid, ns), ns
    assert ns_of(pid, "user") == ns_of(d.pid, "user")
    assert status_fields(pid)["CapEff"] == ["0000000000000000"]


@pytest.mark.skipif(not IS_ROOT, reason="a root daemon's capabilities")
def test_a_refused_chroot_names_the_missing_capability(daemon_factory, tmp_path):
    """Without CAP_SYS_CHROOT the daemon refuses to start and says what it
    lacks, not only "Operation not permitted"."""
    d = daemon_factory(start=False, check_stop=False,
                       worker={"user": "nobody", "group": "nogroup",
                               "chroot": empty_chroot(tmp_path)})
    d.binary = capped(tmp_path, ["setuid", "setgid", "kill", "chown"])
    with pytest.raises(BaseException):
        d.start()
    assert "EPERM: the daemon lacks CAP_SYS_CHROOT; refusing to start" in d.stderr, d.stderr


# ------------------------------------------------------------------ Pod Security

# Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards):
# the capabilities "baseline" lets a container add, and what it forbids.
PSS_BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                     "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def pss_violations(pod, level):
    """What of Pod Security `level` ("baseline" or "restricted") pod breaks."""
    bad = []
    ctrs = pod.get("containers", []) + pod.get("initContainers", [])
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            bad.append(key)
    bad += ["hostPath volume %s" % v["name"] for v in pod.get("volumes", []) if "hostPath" in v]
    pod_ctx = pod.get("securityContext", {})
    for c in ctrs:
        ctx = c.get("securityContext", {})
        if ctx.get("privileged"):
            bad.append("%s: privileged" % c["name"])
        added = set(ctx.get("capabilities", {}).get("add", []))
        allowed = PSS_BASELINE_CAPS if level == "baseline" else {"NET_BIND_SERVICE"}
        bad += ["%s: adds %s" % (c["name"], cap) for cap in sorted(added - allowed)]
        prof = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
        if prof == "Unconfined":
            bad.append("%s: seccomp Unconfined" % c["name"])
        if level == "restricted":
            if ctx.get("allowPrivilegeEscalation") is not False:
                bad.append("%s: allowPrivilegeEscalation" % c["name"])
            if "ALL" not in ctx.get("capabilities", {}).get("drop", []):
                bad.append("%s: does not drop ALL" % c["name"])
            nonroot = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
            if not nonroot or ctx.get("runAsUser", pod_ctx.get("runAsUser", 1)) == 0:
                bad.append("%s: may run as root" % c["name"])
            if prof not in ("RuntimeDefault", "Localhost"):
                bad.append("%s: no seccomp profile" % c["name"])
    return bad


def test_manifests_pod_security_levels():
    """sidecar.yaml and sidecar-restricted.yaml pass "baseline" (no SYS_NICE:
    each worker applies its own priority); daemonset.yaml breaks it by its
    hostPath alone; none passes "restricted" (SYS_CHROOT, or root)."""
    yaml = pytest.importorskip("yaml", reason="python3-yaml not installed")
    k8s = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "k8s")
    pods = {}
    for name in ("sidecar.yaml", "sidecar-restricted.yaml", "daemonset.yaml"):
        with open(os.path.join(k8s, name)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        pods[name] = [d["spec"]["template"]["spec"] for d in docs
                      if d["kind"] in ("Deployment", "DaemonSet")][0]
    assert pss_violations(pods["sidecar.yaml"], "baseline") == []
    assert pss_violations(pods["sidecar-restricted.yaml"], "baseline") == []
    assert pss_violations(pods["daemonset.yaml"], "baseline") == ["hostPath volume sandboxd-socket"]
    assert pss_violations(pods["sidecar-restricted.yaml"], "restricted") == [
        "sandboxd: adds SYS_CHROOT"]
    # the checker itself: SYS_NICE, the cause of the old failure, is caught
    old = {"containers": [{"name": "s", "securityContext": {"capabilities": {"add": ["SYS_NICE"]}}}]}
    assert pss_violations(old, "baseline") == ["s: adds SYS_NICE"]
