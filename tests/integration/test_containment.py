"""Containment: the layers around a worker, seen from outside.

What is checked here, on the real daemon:
  * the start-up log names the active layers;
  * as root: a worker blocked in a tool call runs under the configured uid
    and gid with no supplementary groups, chrooted into the empty directory
    the daemon created (root-owned, 0555), in its own net/ipc/mnt/uts
    namespaces (when the start-up probe found them permitted), with
    no_new_privs and a seccomp filter;
  * as root: the daemon refuses to start rather than run workers as root or
    with a bad chroot (unknown user, root as the worker user, a non-empty or
    writable chroot);
  * as root: a forbidden system call in a worker is answered with `crashed`,
    data.signal 31 and data.syscall / syscall_name from the worker's SIGSYS
    report.  Pure Lua has no way to make a forbidden call (that is the
    point), so the test plays a compromised worker from outside: it ptraces
    the worker while it is blocked in read(2) waiting for a tool result and
    changes the number of the system call that will be restarted.  The
    production binary has no hook for this.

Root-only tests are skipped cleanly when not running as root.
"""

import contextlib
import ctypes
import grp
import os
import pwd
import re
import stat
import subprocess
import time

import pytest

import sbx
from conftest import wait_in_read
from sbx import NO_REPLY

IS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not IS_ROOT, reason="needs root (uid drop, chroot, ptrace)")

TOOLS = [{"name": "T", "functions": ["wait"]}]
BLOCK_CODE = "print('pre') local v = T.wait() return v"
NS_TYPES = {"net": "net", "ipc": "ipc", "mnt": "mnt", "uts": "uts"}


def worker_config(tmpdir, **worker):
    w = {"user": "nobody", "group": "nogroup",
         "chroot": os.path.join(tmpdir, "empty")}
    w.update(worker)
    return w


def same_file(a, b):
    """Whether paths a and b are the same file, by device and inode (the text
    of a /proc/PID/root link depends on the reader's own root)."""
    sa, sb = os.stat(a), os.stat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def status_fields(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def active_namespaces(stderr):
    m = re.search(r"containment: .*namespaces (\S+);", stderr)
    assert m, "no containment line in the start-up log:\n%s" % stderr
    return [] if m.group(1) == "none" else m.group(1).split("+")


def block_in_tool(client, daemon):
    """Start an execution that waits in a tool call; return (id, call, pid)."""
    daemon.assert_no_leftovers()    # an answered execution's worker may still be dying
    i = client.send_execute(BLOCK_CODE, tools=TOOLS, handlers={"T.wait": lambda a: NO_REPLY})
    call = client.wait_deferred(1)
    pids = daemon.wait_for_workers(1)
    assert len(pids) == 1, daemon.children()
    return i, call, pids[0]


# ------------------------------------------------------------------ any uid

def test_startup_log_names_layers(daemon):
    text = daemon.stderr
    assert "containment:" in text, text
    assert "seccomp" in text, text
    if IS_ROOT:
        assert "workers run as uid" in text, text
    else:
        assert "not root" in text, text


# ------------------------------------------------------------------ root: identity

@root_only
def test_worker_identity_chroot_namespaces(daemon_factory, tmp_path):
    tmp = str(tmp_path)
    os.chmod(tmp, 0o755)
    cfg = worker_config(tmp)
    d = daemon_factory(worker=cfg)
    chroot = cfg["chroot"]
    st = os.lstat(chroot)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0, st
    assert stat.S_IMODE(st.st_mode) == 0o555, oct(st.st_mode)
    assert os.listdir(chroot) == []

    c = d.client()
    i, call, pid = block_in_tool(c, d)
    try:
        uid = pwd.getpwnam("nobody").pw_uid
        gid = grp.getgrnam("nogroup").gr_gid
        f = status_fields(pid)
        assert f["Uid"] == [str(uid)] * 4, f["Uid"]
        assert f["Gid"] == [str(gid)] * 4, f["Gid"]
        assert f.get("Groups", []) == [], f.get("Groups")
        assert f["NoNewPrivs"] == ["1"], f["NoNewPrivs"]
        assert f["Seccomp"] == ["2"], f["Seccomp"]
        assert f["CapEff"] == ["0000000000000000"], f["CapEff"]
        assert same_file("/proc/%d/root" % pid, chroot)
        assert same_file("/proc/%d/cwd" % pid, chroot)
        active = active_namespaces(d.stderr)
        for ns in active:
            mine = os.readlink("/proc/%d/ns/%s" % (d.pid, NS_TYPES[ns]))
            theirs = os.readlink("/proc/%d/ns/%s" % (pid, NS_TYPES[ns]))
            assert mine != theirs, (ns, mine, theirs)
        for ns in set(NS_TYPES) - set(active):
            assert "%s namespace not permitted" % ns in d.stderr, d.stderr
    finally:
        c.reply(call, result="done")
    r = c.wait(i)
    assert r.ok and r.result["value"] == "done", r
    assert r.result["output"] == "pre\n", r
    d.assert_no_leftovers()


@root_only
def test_dates_still_local_in_chroot(daemon_factory, tmp_path):
    """The zone file is read before the chroot: dates work inside it."""
    d = daemon_factory(worker=worker_config(str(tmp_path)))
    c = d.client()
    v = c.value("return {os.date('%Y') + 0, os.time{year=2020, month=1, day=1, hour=12} > 0}")
    assert v[0] >= 2024 and v[1] is True, v


# ------------------------------------------------------------------ root: refusals

def start_fails(daemon_factory, pattern, **sections):
    d = daemon_factory(start=False, check_stop=False, **sections)
    with pytest.raises(BaseException):
        d.start(ready_timeout=sbx.SAFETY_NET)
    rc = d.proc.wait(sbx.SAFETY_NET)
    assert rc != 0, rc
    assert re.search(pattern, d.stderr), d.stderr
    assert not os.path.exists(d.socket_path)
    return d


@root_only
def test_refuses_unknown_worker_user(daemon_factory, tmp_path):
    start_fails(daemon_factory, r"no-such-sandboxd-user",
                worker=worker_config(str(tmp_path), user="no-such-sandboxd-user"))


@root_only
def test_refuses_root_as_worker_user(daemon_factory, tmp_path):
    start_fails(daemon_factory, r"must not run as root|refusing",
                worker=worker_config(str(tmp_path), user="root", group="root"))


@root_only
def test_refuses_non_empty_chroot(daemon_factory, tmp_path):
    chroot = tmp_path / "full"
    chroot.mkdir(mode=0o555)
    (chroot / "secret").mkdir()
    start_fails(daemon_factory, r"is not empty",
                worker=worker_config(str(tmp_path), chroot=str(chroot)))


@root_only
def test_refuses_writable_chroot(daemon_factory, tmp_path):
    chroot = tmp_path / "open"
    chroot.mkdir()
    os.chmod(str(chroot), 0o777)
    start_fails(daemon_factory, r"not writable by group or others",
                worker=worker_config(str(tmp_path), chroot=str(chroot)))


@root_only
def test_refuses_chroot_under_writable_parent(daemon_factory, tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(str(parent), 0o777)            # not sticky: others could swap it
    start_fails(daemon_factory, r"ancestor",
                worker=worker_config(str(tmp_path), chroot=str(parent / "empty")))


# ------------------------------------------------------------------ not root: user namespace

NOBODY = (65534, 65534)


def host_allows_userns(ids):
    """Whether a process under ids may create the namespaces the daemon uses
    (asked of util-linux unshare, independently of the daemon's own probe)."""
    try:
        p = subprocess.run(["unshare", "-U", "-r", "-n", "-m", "-i", "-u", "true"],
                           user=ids[0], group=ids[1], extra_groups=[],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0


@root_only
def test_non_root_daemon_gets_user_namespace_layers(daemon_factory):
    """A daemon that is not root (started here as nobody) cannot drop ids or
    chroot, but where the host permits user namespaces its workers still get
    their own user, net, ipc, mnt and uts namespaces, an empty read-only
    root, no capabilities, and the seccomp filter; ordinary code still works
    (the zone file was read before the chroot)."""
    d = daemon_factory(run_as=NOBODY)
    text = d.stderr
    assert "not root" in text, text
    if not host_allows_userns(NOBODY):
        assert "user namespaces not available here" in text, text
        pytest.skip("this host forbids unprivileged user namespaces")
    assert "user+net+ipc+mnt+uts" in text, text
    c = d.client()
    assert c.value("return os.date('%Y') == os.date('!%Y') or true") is True
    assert c.value("return #string.rep('x', 1000)") == 1000
    i, call, pid = block_in_tool(c, d)
    try:
        f = status_fields(pid)
        assert f["Uid"] == [str(NOBODY[0])] * 4, f["Uid"]
        assert f["CapEff"] == ["0000000000000000"], f["CapEff"]
        assert f["CapPrm"] == ["0000000000000000"], f["CapPrm"]
        assert f["NoNewPrivs"] == ["1"], f["NoNewPrivs"]
        assert f["Seccomp"] == ["2"], f["Seccomp"]
        assert os.listdir("/proc/%d/root" % pid) == []
        for ns in ("user", "net", "ipc", "mnt", "uts"):
            mine = os.readlink("/proc/%d/ns/%s" % (d.pid, ns))
            theirs = os.readlink("/proc/%d/ns/%s" % (pid, ns))
            assert mine != theirs, (ns, mine, theirs)
        # the job's priority (default low: nice 10) reached the worker; a
        # pool priority set inside the namespace could not be undone
        with open("/proc/%d/stat" % pid) as fh:
            nice = int(fh.read().rsplit(")", 1)[1].split()[16])
        assert nice == 10, nice
        # the empty root cannot be written, even by root on the host
        with pytest.raises(OSError):
            open("/proc/%d/root/x" % pid, "w")
    finally:
        c.reply(call, result="done")
    r = c.wait(i)
    assert r.ok, r
    d.assert_no_leftovers()


# ------------------------------------------------------------------ root: SIGSYS report

PTRACE_GETREGS, PTRACE_SETREGS, PTRACE_DETACH = 12, 13, 17
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
WALL = 0x40000000
ORIG_RAX, RAX = 15, 10          # indexes in struct user_regs_struct (x86_64)
ERESTARTSYS = 512


class UserRegs(ctypes.Structure):
    _fields_ = [("r", ctypes.c_ulong * 27)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    return libc


@contextlib.contextmanager
def stopped_in_read(pid):
    """pid, once blocked in read(2), seized and stopped by ptrace: yields the
    libc to ptrace it with; detached afterwards, whatever the body did.
    Skips the test where ptrace is not permitted."""
    wait_in_read(pid)
    libc = _libc()
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        pytest.skip("ptrace not permitted here: %s" % os.strerror(ctypes.get_errno()))
    try:
        assert libc.ptrace(PTRACE_INTERRUPT, pid, None, None) == 0, os.strerror(ctypes.get_errno())
        _, status = os.waitpid(pid, WALL)
        assert os.WIFSTOPPED(status), status
        yield libc
    finally:
        libc.ptrace(PTRACE_DETACH, pid, None, None)


def redirect_blocked_syscall(pid, nr):
    """pid is blocked in a restartable read(2): make the restarted call `nr`."""
    with stopped_in_read(pid) as libc:
        regs = UserRegs()
        assert libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) == 0
        assert regs.r[ORIG_RAX] == 0, "worker not in read(2): orig_rax %d" % regs.r[ORIG_RAX]
        assert ctypes.c_long(regs.r[RAX]).value == -ERESTARTSYS, regs.r[RAX]
        regs.r[ORIG_RAX] = nr       # restart logic: rax = orig_rax, rip -= 2
        assert libc.ptrace(PTRACE_SETREGS, pid, None, ctypes.byref(regs)) == 0


SYS_OPENAT, SYS_GETPID, SYS_RT_SIGACTION, SYS_RT_SIGRETURN = 257, 39, 13, 15
X32_BIT = 0x40000000


@root_only
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 register layout")
@pytest.mark.parametrize("nr,name", [(SYS_OPENAT, "openat"), (SYS_GETPID, "getpid")])
def test_forbidden_syscall_reported(daemon, nr, name):
    c = daemon.client()
    i, call, pid = block_in_tool(c, daemon)
    redirect_blocked_syscall(pid, nr)
    r = c.wait(i)
    assert r.code == -32007 and r.kind == "crashed", r
    assert r.data["signal"] == 31, r
    assert r.data["syscall"] == nr and r.data["syscall_name"] == name, r
    assert name in r.message, r
    assert r.data.get("output") == "pre\n", r
    daemon.wait_log(r"forbidden system call %d \(%s\)" % (nr, name))
    daemon.assert_no_leftovers()
    c.close()
    daemon.assert_alive()


@root_only
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 register layout")
@pytest.mark.parametrize("nr", [SYS_RT_SIGACTION, SYS_RT_SIGRETURN, X32_BIT | SYS_GETPID],
                         ids=["rt_sigaction", "rt_sigreturn", "x32"])
def test_kill_rules_die_without_report(daemon, nr):
    """Calls the filter kills at once (the handler's own plumbing, other ABIs):
    still `crashed` with signal 31, but no syscall number."""
    c = daemon.client()
    i, call, pid = block_in_tool(c, daemon)
    redirect_blocked_syscall(pid, nr)
    r = c.wait(i)
    assert r.code == -32007 and r.kind == "crashed", r
    assert r.data["signal"] == 31, r
    assert "syscall" not in r.data, r
    daemon.assert_no_leftovers()
    c.close()
    daemon.assert_alive()
