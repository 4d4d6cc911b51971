"""The container image (deploy/Containerfile) and the manifests (deploy/k8s),
run for real with podman (tests/image/run sets up its storage and
configuration and the local Debian 12 base; see there).

The image is built once from the base, then run with each manifest's
security context translated into podman flags, and the manifests are played
with `podman kube play` (the Deployment with one replica: podman 4.3 would
share one emptyDir between replicas; the DaemonSet's pod template as a Pod).
The host, root here, reaches the daemons' sockets through bind mounts and
their processes through /proc, so the checks are the integration suite's:
executions succeed, attacks are contained, a forbidden system call kills
only its worker, SIGTERM is clean, and `sandboxctl health` fails while the
zygote is killed as it starts, then recovers.
"""

import copy
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import sbx  # noqa: E402
from test_containment import redirect_blocked_syscall, SYS_OPENAT  # noqa: E402

DIR = os.environ.get("SANDBOXD_IMAGE_DIR", os.path.join(REPO, "build", "image"))
BASE = os.environ.get("SANDBOXD_IMAGE_BASE", "localhost/sandboxd-test-base:bookworm")
VERSION = open(os.path.join(REPO, "VERSION")).read().strip()
IMAGE = "registry.example.com/sandboxd:" + VERSION      # the manifests' name for it
AGENT = "registry.example.com/my-agent:latest"
NET = 60 * sbx.SCALE
TOOLS = [{"name": "T", "functions": ["wait"]}]


def podman(*args, check=True, timeout=600, **kw):
    p = subprocess.run(["podman"] + list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("podman %s: %d\n%s%s" % (" ".join(args), p.returncode, p.stdout,
                                                        p.stderr))
    return p


def report(line):
    with open(os.path.join(DIR, "report.txt"), "a") as f:
        f.write("test-image: %s\n" % line)


def wait_until(pred, what, timeout=NET):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.05)


def manifest(name):
    with open(os.path.join(REPO, "deploy", "k8s", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def sandboxd_container(pod_spec):
    return [c for c in pod_spec["containers"] if c["name"] == "sandboxd"][0]


def config_text(docs):
    return one(docs, "ConfigMap")["data"]["sandboxd.conf"]


# ------------------------------------------------------------------ the image

@pytest.fixture(scope="session")
def image():
    if os.path.exists(os.path.join(DIR, "report.txt")):
        os.unlink(os.path.join(DIR, "report.txt"))
    t0 = time.monotonic()
    podman("build", "--network", "host", "-f", "deploy/Containerfile",
           "--build-arg", "BUILD_BASE=" + BASE, "--build-arg", "RUN_BASE=" + BASE,
           "--build-arg", "VERSION=" + VERSION, "-t", IMAGE, ".", cwd=REPO, timeout=1200)
    podman("tag", IMAGE, AGENT)
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    base = int(podman("image", "inspect", "--format", "{{.Size}}", BASE).stdout)
    report("image %s built in %.0f s, %.1f MB: its base %.1f MB + %.1f MB" % (
        IMAGE, time.monotonic() - t0, size / 1e6, base / 1e6, (size - base) / 1e6))
    return IMAGE


def test_context_leaves_the_build_out():
    """.containerignore and .dockerignore agree and keep build/, .git and
    node_modules out of the build context."""
    lists = []
    for name in (".containerignore", ".dockerignore"):
        with open(os.path.join(REPO, name)) as f:
            lists.append([ln.strip() for ln in f if ln.strip() and not ln.startswith("#")])
    assert lists[0] == lists[1], lists
    for must in (".git", "build", "**/node_modules"):
        assert must in lists[0], lists[0]


def test_image_is_small_stripped_labelled_and_clean(image):
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    labels = info["Config"]["Labels"] or info.get("Labels") or {}
    assert labels.get("org.opencontainers.image.version") == VERSION, labels
    assert labels.get("org.opencontainers.image.title") == "sandboxd", labels
    assert labels.get("org.opencontainers.image.licenses") == "MIT", labels
    # what the runtime stage adds to its base: five libraries, two stripped
    # binaries, the sample configuration; no apt lists or caches
    base = int(podman("image", "inspect", "--format", "{{.Size}}", BASE).stdout)
    assert info["Size"] - base < 5e6, (info["Size"], base)
    assert info["Config"]["Entrypoint"] == ["/usr/sbin/sandboxd"], info["Config"]
    # what the runtime stage left: no apt lists or caches (the base has no
    # docker-clean hook), stripped binaries, only the runtime libraries
    p = podman("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c",
               "find /var/lib/apt/lists /var/cache/apt -type f | wc -l; "
               "ls /usr/include 2>/dev/null | wc -l; "
               "dpkg-query -W -f='${Package}\\n' | grep -c -- '-dev$' || true; "
               "/usr/sbin/sandboxd --version; /usr/bin/sandboxctl --version")
    out = p.stdout.split("\n")
    assert out[:3] == ["0", "0", "0"], p.stdout     # apt files, headers, -dev packages
    assert "sandboxd %s (protocol" % VERSION in p.stdout and "sandboxctl %s" % VERSION in p.stdout
    mnt = podman("image", "mount", image).stdout.strip()
    try:
        for b in ("usr/sbin/sandboxd", "usr/bin/sandboxctl"):
            r = subprocess.run(["readelf", "-S", os.path.join(mnt, b)], capture_output=True,
                               text=True)
            assert ".symtab" not in r.stdout and ".debug_info" not in r.stdout, b
    finally:
        podman("image", "unmount", image, check=False)


# ------------------------------------------------------------------ podman run, per manifest

def run_flags(ctx, pod_ctx=None):
    """A Kubernetes securityContext as podman run flags."""
    pod_ctx = pod_ctx or {}
    f = []
    user = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
    group = ctx.get("runAsGroup", pod_ctx.get("runAsGroup"))
    if user is not None:
        f += ["--user", "%d:%d" % (user, group) if group is not None else str(user)]
    caps = ctx.get("capabilities", {})
    for c in caps.get("drop", []):
        f += ["--cap-drop", c.lower()]
    for c in caps.get("add", []):
        f += ["--cap-add", c.lower()]
    if ctx.get("allowPrivilegeEscalation") is False:
        f += ["--security-opt", "no-new-privileges"]
    if ctx.get("readOnlyRootFilesystem"):
        f += ["--read-only", "--read-only-tmpfs=false"]
    prof = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
    assert prof in (None, "RuntimeDefault"), prof     # podman's default profile
    if "fsGroup" in pod_ctx:
        f += ["--group-add", str(pod_ctx["fsGroup"])]
    return f


class Daemon:
    """The image run as a manifest's sandboxd container: its config from the
    manifest's ConfigMap, its socket directory a host directory."""

    def __init__(self, name, conf, flags, sock_owner=(0, 0), extra=()):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="sbxd-image-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.sockdir = os.path.join(self.dir, "run")
        os.mkdir(self.sockdir)
        os.chown(self.sockdir, *sock_owner)
        with open(os.path.join(self.dir, "sandboxd.conf"), "w") as f:
            # no warm pool: the one live worker is the execution's
            f.write(re.sub(r"^pool_size = \d+$", "pool_size = 0", conf, flags=re.M))
        os.chmod(os.path.join(self.dir, "sandboxd.conf"), 0o644)
        self.socket = os.path.join(self.sockdir, "sandboxd.sock")
        podman("rm", "-f", name, check=False)
        podman("run", "-d", "--name", name, "--network", "none",
               "-v", "%s:/run/sandboxd" % self.sockdir,
               "-v", "%s/sandboxd.conf:/etc/sandboxd/sandboxd.conf:ro" % self.dir,
               *flags, *extra, IMAGE, "-c", "/etc/sandboxd/sandboxd.conf")
        self.pid = int(podman("inspect", "--format", "{{.State.Pid}}", name).stdout)
        wait_until(lambda: "listening on" in self.log() or not self.running(), "the daemon")
        assert self.running(), self.log()

    def log(self):
        p = podman("logs", self.name, check=False)
        return p.stdout + p.stderr

    def running(self):
        return podman("inspect", "--format", "{{.State.Running}}", self.name).stdout.strip() == "true"

    def children(self):
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        st = f.read()
                except OSError:
                    continue
                rest = st.rsplit(")", 1)[1].split()
                if int(rest[1]) == self.pid:
                    out.append((int(d), st.split("(", 1)[1].rsplit(")", 1)[0], rest[0]))
        return out

    def workers(self):
        """Live workers (a killed one may linger as a zombie until reaped)."""
        return [p for p, comm, state in self.children() if comm == "sandboxd-worker" and state != "Z"]

    def zygotes(self):
        return [p for p, comm, state in self.children()
                if comm == "sandboxd-zygote" and state != "Z" and os.getsid(p) == p]

    def health(self):
        p = podman("exec", self.name, "/usr/bin/sandboxctl", "health", check=False)
        return p.returncode, p.stdout + p.stderr

    def stop(self):
        podman("stop", "-t", "30", self.name, check=False)
        code = int(podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout)
        log = self.log()
        podman("rm", "-f", self.name, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        return code, log


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return {k: v.split() for k, v in (ln.split(":", 1) for ln in f if ":" in ln)}


def ns(pid, kind):
    return os.readlink("/proc/%d/ns/%s" % (pid, kind))


def contained(c, d):
    """The checks every deployment must pass: a value, an attack contained
    and its legitimate neighbour served, a forbidden system call that kills
    only its worker.  Returns the worker's facts for the report."""
    assert c.value("return 6 * 7") == 42
    assert c.value("return os.execute == nil and io == nil and require == nil "
                   "and load('return 1', 'x', 't', {})() == 1") is True
    r = c.execute("local t = {} for i = 1, 1e8 do t[i] = i end", limits={"max_heap": 8000000})
    assert r.kind == "memory_limit", r
    i = c.send_execute("print('pre') return T.wait()", tools=TOOLS,
                       handlers={"T.wait": lambda a: sbx.NO_REPLY})
    call = c.wait_deferred(1)
    pid = wait_until(lambda: len(d.workers()) == 1 and d.workers()[0], "the worker")
    facts = status(pid)
    facts["ns"] = {k: ns(pid, k) != ns(d.pid, k) for k in ("user", "net", "ipc", "mnt", "uts")}
    facts["root_empty"] = os.listdir("/proc/%d/root" % pid) == []
    with open("/proc/%d/stat" % pid) as f:
        facts["nice"] = int(f.read().rsplit(")", 1)[1].split()[16])
    assert facts["CapEff"] == ["0000000000000000"], facts
    assert facts["NoNewPrivs"] == ["1"] and facts["Seccomp"] == ["2"], facts
    redirect_blocked_syscall(pid, SYS_OPENAT)
    r = c.wait(i)
    assert r.kind == "crashed" and r.data["syscall_name"] == "openat", r
    del call
    assert c.value("return 'still serving'") == "still serving"
    return facts


def unstartable_then_healthy(d):
    """Kill every zygote as it starts until health fails, then leave it:
    health passes again after the back-off."""
    assert d.health()[0] == 0, d.health()

    def down():
        for z in d.zygotes():
            try:
                os.kill(z, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc, out = d.health()
        return rc == 1 and "cannot start workers since" in out
    wait_until(down, "health to fail while the zygote is killed")
    wait_until(lambda: d.health()[0] == 0, "health to pass again")


def sidecar_context():
    docs = manifest("sidecar.yaml")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    return config_text(docs), run_flags(sandboxd_container(pod)["securityContext"],
                                        pod.get("securityContext"))


def test_sidecar_security_context(image):
    conf, flags = sidecar_context()
    d = Daemon("sbxd-image-sidecar", conf, flags)
    try:
        with sbx.Client(d.socket) as c:
            facts = contained(c, d)
        log = d.log()
        assert "namespaces user+net+ipc+mnt+uts;" in log, log
        assert facts["ns"] == {"user": True, "net": True, "ipc": True, "mnt": True, "uts": True}
        assert facts["Uid"] == ["65534"] * 4 and facts["root_empty"], facts
        assert facts["nice"] == 10, facts                # priority low, without SYS_NICE
        unstartable_then_healthy(d)
    finally:
        code, log = d.stop()
    assert code == 0 and "stopped" in log, (code, log)
    report("sidecar context (root, SETUID SETGID SYS_CHROOT KILL CHOWN, podman's default "
           "seccomp profile): uid nobody, chroot, namespaces user+net+ipc+mnt+uts, nice 10, "
           "seccomp; SIGTERM exit 0")


def test_daemonset_security_context(image):
    docs = manifest("daemonset.yaml")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    d = Daemon("sbxd-image-node", config_text(docs),
               run_flags(sandboxd_container(pod)["securityContext"], pod.get("securityContext")))
    try:
        with sbx.Client(d.socket) as c:
            facts = contained(c, d)
        assert facts["ns"]["net"] and facts["Uid"] == ["65534"] * 4, facts
    finally:
        code, log = d.stop()
    assert code == 0, (code, log)


def test_sidecar_under_a_profile_that_refuses_namespaces(image, tmp_path):
    """The sidecar's context under a seccomp profile that refuses user
    namespaces as containerd's does: uid drop and chroot still, no
    namespaces, and each warning names the seccomp filter, not a missing
    capability alone."""
    conf, flags = sidecar_context()
    d = Daemon("sbxd-image-sidecar-cd", conf, flags, extra=[
        "--security-opt", "seccomp=" + containerd_like_profile(str(tmp_path / "p.json"))])
    try:
        with sbx.Client(d.socket) as c:
            facts = contained(c, d)
        log = d.log()
        assert facts["Uid"] == ["65534"] * 4 and facts["root_empty"], facts
        assert not any(facts["ns"].values()), facts
        assert facts["nice"] == 10, facts       # the worker's own: no SYS_NICE, no user namespace
        assert re.search(r"<4>.*net namespace not permitted here \(EPERM: the daemon lacks "
                         r"CAP_SYS_ADMIN; nor through a user namespace: EPERM from the seccomp "
                         r"filter.*refuse unshare", log), log
        assert "namespaces none;" in log, log
    finally:
        code, log = d.stop()
    assert code == 0, (code, log)
    report("sidecar context under a containerd-like profile: uid nobody, chroot, namespaces "
           "none (the log names the seccomp filter)")


# ------------------------------------------------------------------ the restricted variant

def restricted():
    docs = manifest("sidecar-restricted.yaml")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    ctr = sandboxd_container(pod)
    return config_text(docs), ctr["securityContext"], pod.get("securityContext", {})


def containerd_like_profile(path):
    """podman's default seccomp profile with namespaces refused as
    containerd's and Docker's default refuse them without CAP_SYS_ADMIN:
    unshare, setns and namespace flags of clone fail with EPERM, clone3
    with ENOSYS (so libc falls back to clone)."""
    with open("/usr/share/containers/seccomp.json") as f:
        prof = json.load(f)
    gated = {"unshare", "setns", "clone", "clone3", "mount"}
    for rule in prof["syscalls"]:
        rule["names"] = [n for n in rule.get("names", []) if n not in gated or
                         rule.get("includes", {}).get("caps") == ["CAP_SYS_ADMIN"]]
    prof["syscalls"] = [r for r in prof["syscalls"] if r["names"]]
    ns_flags = 0x7E020000          # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
    prof["syscalls"] += [
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": ns_flags, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
        {"names": ["unshare", "setns", "mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ]
    with open(path, "w") as f:
        json.dump(prof, f)
    return path


@pytest.mark.parametrize("profile", ["podman", "podman-no-chroot", "containerd"])
def test_restricted_variant(image, profile, tmp_path):
    """Non-root, no privilege escalation, at most SYS_CHROOT: what workers
    get depends on the runtime's seccomp profile, and the start-up log says
    which step was refused and by what."""
    conf, ctx, pod_ctx = restricted()
    ctx = copy.deepcopy(ctx)
    extra = []
    if profile == "podman-no-chroot":
        ctx["capabilities"]["add"] = []
    if profile == "containerd":
        extra = ["--security-opt", "seccomp=" + containerd_like_profile(str(tmp_path / "p.json"))]
    uid, gid = ctx["runAsUser"], ctx["runAsGroup"]
    # the host's client connects as root: admit it too (the manifest admits
    # only the daemon's own uid, for the probes, and the agents' group)
    conf = re.sub(r"^allow_uids = (.*)$", r"allow_uids = 0 \1", conf, flags=re.M)
    d = Daemon("sbxd-image-restricted", conf, run_flags(ctx, pod_ctx), sock_owner=(uid, gid),
               extra=extra)
    try:
        with sbx.Client(d.socket) as c:
            facts = contained(c, d)
        log = d.log()
        assert facts["Uid"] == [str(uid)] * 4, facts
        if profile == "podman":
            assert "namespaces user+net+ipc+mnt+uts" in log, log
            assert all(facts["ns"].values()) and facts["root_empty"], facts
        else:
            assert "<4>" in log and "user namespaces not available here" in log, log
            assert not facts["ns"]["net"], facts
            want = ("chroot(2)" if profile == "podman-no-chroot" else "refuse unshare")
            assert "seccomp filter" in log and want in log, log
        line = [ln for ln in log.splitlines() if "containment:" in ln][0]
        report("restricted variant under %s: %s" % (profile, line.split("containment: ", 1)[1]))
    finally:
        code, log = d.stop()
    assert code == 0, (code, log)


# ------------------------------------------------------------------ podman kube play

def play(docs, name):
    path = os.path.join(DIR, name)
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f)
    podman("kube", "down", path, check=False)
    podman("kube", "play", "--network", "none", path, timeout=300)
    return path


def agentify(pod_spec):
    """The agent container: our image (it has sandboxctl), waiting."""
    for c in pod_spec["containers"]:
        if c["name"] != "sandboxd":
            c["image"] = AGENT
            c["command"] = ["sleep", "infinity"]
        c["imagePullPolicy"] = "Never"


def container_of(pod, name):
    ids = podman("ps", "-a", "--filter", "pod=" + pod, "--format", "{{.Names}}").stdout.split()
    found = [i for i in ids if i.endswith("-" + name)]
    assert len(found) == 1, ids
    return found[0]


def from_agent(ctr, *args):
    return podman("exec", ctr, "/usr/bin/sandboxctl", *args, check=False)


def kube_checks(pod, sbxd):
    agent = container_of(pod, "agent")
    # ready as the readiness probe says, asked from the agent (gid 2000)
    try:
        wait_until(lambda: from_agent(agent, "health").returncode == 0, "the daemon, from the agent")
    except AssertionError:
        p = from_agent(agent, "health")
        raise AssertionError("health from the agent: %s%s\nthe daemon's log: %s" % (
            p.stdout, p.stderr, podman("logs", sbxd, check=False).stderr[-3000:]))
    p = from_agent(agent, "exec", "-e", "return 6 * 7")
    assert p.returncode == 0 and p.stdout.strip() == "42", p.stdout + p.stderr
    p = from_agent(agent, "exec", "-e", "return io.open('/etc/passwd')")
    assert p.returncode == 1 and "io" in p.stderr, p.stdout + p.stderr
    p = podman("exec", sbxd, "/usr/bin/sandboxctl", "-s", "/run/sandboxd/sandboxd.sock", "health",
               check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    log = podman("logs", sbxd).stdout + podman("logs", sbxd).stderr
    assert "namespaces user+net+ipc+mnt+uts" in log, log


def emptydir_as_kubernetes_makes_it(pod_spec, where):
    """podman makes an emptyDir a volume owned by the first container that
    mounts it (here the agent, uid 1000), where Kubernetes makes it 0777,
    with the fsGroup's group and setgid: the daemon, root without
    DAC_OVERRIDE, could then not create its socket.  So each emptyDir
    becomes a directory made as Kubernetes makes it."""
    group = pod_spec.get("securityContext", {}).get("fsGroup")
    for v in pod_spec["volumes"]:
        if "emptyDir" in v:
            path = os.path.join(where, v["name"])
            os.mkdir(path)
            if group is not None:
                os.chown(path, 0, group)
            os.chmod(path, 0o2777 if group is not None else 0o777)
            del v["emptyDir"]
            v["hostPath"] = {"path": path, "type": "Directory"}


def test_kube_play_sidecar(image, tmp_path):
    docs = manifest("sidecar.yaml")
    dep = one(docs, "Deployment")
    dep["spec"]["replicas"] = 1
    agentify(dep["spec"]["template"]["spec"])
    os.chmod(str(tmp_path), 0o755)
    emptydir_as_kubernetes_makes_it(dep["spec"]["template"]["spec"], str(tmp_path))
    path = play(docs, "sidecar.yaml")
    try:
        pods = podman("pod", "ps", "--format", "{{.Name}}").stdout.split()
        pod = [p for p in pods if p.startswith("agent")][0]
        sbxd = container_of(pod, "sandboxd")
        kube_checks(pod, sbxd)
    finally:
        podman("pod", "stop", "-t", "30", pod, check=False)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", sbxd, check=False).stdout.strip()
        podman("kube", "down", path, check=False)
    assert code == "0", code
    report("kube play sidecar.yaml (replicas 1): executions from the agent, attack contained, "
           "health 0, stop exit 0")


def test_kube_play_daemonset_template(image, tmp_path):
    docs = manifest("daemonset.yaml")
    ds = one(docs, "DaemonSet")
    hostdir = str(tmp_path / "run-sandboxd")
    os.mkdir(hostdir)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sandboxd-node"},
           "spec": copy.deepcopy(ds["spec"]["template"]["spec"])}
    agent = copy.deepcopy(one(docs, "Pod"))
    for p in (pod, agent):
        agentify(p["spec"])
        for v in p["spec"]["volumes"]:
            if "hostPath" in v:
                v["hostPath"]["path"] = hostdir
        p["metadata"].pop("namespace", None)
    cm = copy.deepcopy(one(docs, "ConfigMap"))
    cm["metadata"].pop("namespace", None)
    path = play([cm, pod], "daemonset-pod.yaml")
    apath = None
    try:
        sbxd = container_of("sandboxd-node", "sandboxd")
        wait_until(lambda: os.path.exists(os.path.join(hostdir, "sandboxd.sock")), "the socket")
        apath = play([agent], "daemonset-agent.yaml")
        kube_checks("agent-example", sbxd)
    finally:
        if apath:
            podman("kube", "down", apath, check=False)
        podman("pod", "stop", "-t", "30", "sandboxd-node", check=False)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", sbxd, check=False).stdout.strip()
        podman("kube", "down", path, check=False)
    assert code == "0", code
    report("kube play daemonset.yaml's pod template as a Pod, with its agent-example pod: "
           "executions from the agent, attack contained, health 0, stop exit 0")


# ------------------------------------------------------------------ the documented commands

def documented_commands():
    """The podman commands of docs/deployment.md's container block, joined."""
    with open(os.path.join(REPO, "docs", "deployment.md")) as f:
        text = f.read()
    block = re.search(r"```sh\n(podman build -f deploy/Containerfile.*?)```", text, re.S)
    assert block, "docs/deployment.md has no podman block"
    cmds = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            cmds.append(shlex.split(line.split("|", 1)[0]))
    return cmds


def test_documented_podman_commands(image, tmp_path):
    """docs/deployment.md's commands, as written but for the name, the
    socket directory and the build (done by the fixture): the sample
    configuration serves, health passes, the stop is clean."""
    cmds = documented_commands()
    assert cmds[0][:2] == ["podman", "build"] and cmds[0][-2:] == [IMAGE, "."], cmds[0]
    name = "sbxd-image-doc"
    sockdir = str(tmp_path / "run")
    os.mkdir(sockdir)
    podman("rm", "-f", name, check=False)
    try:
        for cmd in cmds[1:]:
            cmd = [name if a == "sandboxd" else a for a in cmd]
            cmd = [a.replace("/run/sandboxd:/run/sandboxd", sockdir + ":/run/sandboxd") for a in cmd]
            if "--name" in cmd:
                cmd[cmd.index("--name") + 1] = name
            if cmd[1] == "exec" and cmd[3] == "sandboxctl":
                wait_until(lambda: os.path.exists(os.path.join(sockdir, "sandboxd.sock")),
                           "the socket")
            p = podman(*cmd[1:], check=False)
            assert p.returncode == 0, (cmd, p.stdout, p.stderr)
            if "health" in cmd:
                assert p.stdout.startswith("healthy: "), p.stdout
            if "exec" in cmd and "-e" in cmd:
                assert p.stdout.strip() == "42", p.stdout
        code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "0", (code, podman("logs", name).stderr)
    finally:
        podman("rm", "-f", name, check=False)
