"""machine.py - a Debian 12 root booted with systemd-nspawn, driven from the host.

Stdlib only.  A Machine is one container: the cached root booted with
`systemd-nspawn --register=no --keep-unit --boot` (no machined: this host's
PID 1 need not be systemd) and --volatile=overlay, so every write lands in a
tmpfs that goes away with the container and the cached root is never
changed.  Commands run inside with nsenter into
every namespace of the container's init, with a clean environment; the host
reaches files and sockets inside through /proc/LEADER/root (the container's
/run is a tmpfs of its own, not the root directory's run/).  Processes inside
are seen from the host's /proc: those whose pid namespace is the
container's.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time

ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "TERM=dumb"]


class CannotBoot(Exception):
    """The container did not boot: the host cannot run it (not a sandboxd failure)."""


class Proc:
    def __init__(self, pid):
        self.pid = pid                          # host pid
        with open("/proc/%d/status" % pid) as f:
            st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        self.status = st
        self.nspid = int(st["NSpid"].split()[-1])  # pid inside the container
        self.ppid = int(st["PPid"])
        self.uid = int(st["Uid"].split()[0])
        self.gid = int(st["Gid"].split()[0])
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            self.argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]

    def __repr__(self):
        return "Proc(host %d, ns %d, uid %d: %s)" % (self.pid, self.nspid, self.uid,
                                                    " ".join(self.argv))


class Machine:
    def __init__(self, image, workdir, binds=()):
        self.image = image              # the cached root, never modified
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "boot.log")
        self.binds = list(binds)        # (host path, path inside), read-only
        self.nspawn = None
        self.leader = None
        self.pidns = None

    # ------------------------------------------------------------ lifecycle
    def boot(self, timeout=120):
        cmd = ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit",
               "--private-network", "--link-journal=no", "--console=read-only",
               "--volatile=overlay", "-D", self.image]
        cmd += ["--bind-ro=%s:%s" % b for b in self.binds]
        cmd += ["--boot"]
        # systemd-nspawn --keep-unit splits the cgroup it starts in into
        # payload/ and supervisor/: start it in one of its own, so that two
        # containers (two worktrees' runs) never share one, and so that what
        # it leaves behind can be removed.
        self.cgroups = _own_cgroups("sandboxd-systemd-test-%d" % os.getpid())

        def enter_cgroups():
            for d in self.cgroups:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write("0")
        log = open(self.log_path, "wb")
        t0 = time.monotonic()
        self.nspawn = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=enter_cgroups)
        log.close()
        deadline = t0 + timeout
        while self.leader is None:
            if self.nspawn.poll() is not None:
                raise CannotBoot("systemd-nspawn exited with %d: %s" %
                                 (self.nspawn.returncode, self._log_tail()))
            if time.monotonic() > deadline:
                raise CannotBoot("no init started within %d s: %s" % (timeout, self._log_tail()))
            for p in _children(self.nspawn.pid):
                if os.readlink("/proc/%d/ns/pid" % p) != os.readlink("/proc/self/ns/pid"):
                    self.leader = p
            time.sleep(0.05)
        self.pidns = os.readlink("/proc/%d/ns/pid" % self.leader)
        # systemd's own socket appears a moment after init starts.
        while not os.path.exists(self.path("/run/systemd/private")):
            if self.nspawn.poll() is not None or time.monotonic() > deadline:
                raise CannotBoot("systemd did not come up: %s" % self._log_tail())
            time.sleep(0.05)
        left = max(1, deadline - time.monotonic())
        r = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=left)
        state = r.stdout.strip()
        if state not in ("running", "degraded"):
            raise CannotBoot("boot ended in state %r: %s" % (state, self._log_tail()))
        self.boot_seconds = time.monotonic() - t0
        self.boot_state = state
        return state

    def save_journal(self, dest):
        """Copy the container's journal files out (journalctl -D DEST reads them)."""
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(self.path("/var/log/journal"), dest)

    def shutdown(self, timeout=60):
        """Power the container off (SIGTERM to nspawn: a clean halt), then make sure
        nothing of it is left."""
        if self.nspawn is None:
            return
        if self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.nspawn.pid, signal.SIGKILL)
                self.nspawn.wait(10)
        if self.pidns is not None:
            left = [p for p in self.procs()]
            for p in left:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for top in self.cgroups:
            for d, _, _ in sorted(os.walk(top), key=lambda t: -len(t[0])):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        self.nspawn = None

    def _log_tail(self, n=15):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no log)"
        lines = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", l) for l in lines]
        return " | ".join(l.strip() for l in lines[-n:] if l.strip())

    # ------------------------------------------------------------ inside
    def path(self, p):
        """A path inside the running container, as the host reaches it."""
        return "/proc/%d/root%s" % (self.leader, p)

    def run(self, *cmd, check=True, timeout=60, input=None):
        argv = ["nsenter", "-t", str(self.leader), "-a", "-r", "-w",
                "/usr/bin/env", "-i"] + ENV + list(cmd)
        r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("in the container, %s exited with %d:\n%s%s" %
                                 (" ".join(cmd), r.returncode, r.stdout, r.stderr))
        return r

    def sh(self, script, **kw):
        return self.run("/bin/sh", "-ec", script, **kw)

    def out(self, *cmd, **kw):
        return self.run(*cmd, **kw).stdout

    def show(self, unit, *props):
        """systemctl show's properties of unit, as a dict of strings."""
        out = self.out("systemctl", "show", unit, "-p", ",".join(props))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def cursor(self):
        """The journal's current end, for journal(after=...)."""
        out = self.out("journalctl", "-n", "0", "--show-cursor", "--no-pager", "-q")
        m = re.search(r"-- cursor: (\S+)", out)
        assert m, "no cursor in %r" % out
        return m.group(1)

    def journal(self, unit=None, after=None):
        """The journal entries (dicts, journalctl -o json) after a cursor: those
        of unit (its processes' and systemd's about it) when unit is given.
        The unit is matched here, not with -u: journalctl 252 with a match and
        --after-cursor skips the first matching entry when the cursor's own
        entry does not match."""
        cmd = ["journalctl", "-o", "json", "--no-pager", "-q"]
        if after:
            cmd += ["--after-cursor", after]
        out = self.out(*cmd)
        entries = [json.loads(line) for line in out.splitlines() if line.strip()]
        if unit:
            entries = [e for e in entries if unit in (e.get("_SYSTEMD_UNIT"), e.get("UNIT"))]
        return entries

    def wait_journal(self, pred, unit=None, after=None, timeout=20, what="a journal entry"):
        """The first entry for which pred holds, waiting for journald to catch up."""
        deadline = time.monotonic() + timeout
        while True:
            entries = self.journal(unit, after)
            for e in entries:
                if pred(e):
                    return e
            if time.monotonic() > deadline:
                msgs = [e.get("MESSAGE") for e in entries][-30:]
                raise AssertionError("no %s in the journal within %d s; last entries: %s" %
                                     (what, timeout, "\n".join(map(str, msgs))))
            time.sleep(0.2)

    def procs(self):
        """Every process in the container (host view)."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.readlink("/proc/%s/ns/pid" % name) != self.pidns:
                    continue
                found.append(Proc(int(name)))
            except (OSError, KeyError, ValueError):
                continue            # gone meanwhile, or a zombie without a cmdline
        return found

    def host_pid(self, nspid):
        for p in self.procs():
            if p.nspid == nspid:
                return p.pid
        return None


def _children(pid):
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(name))
    return kids


def _own_cgroups(name):
    """A new cgroup called name under ours in the hierarchies systemd-nspawn
    uses (the unified one, and name=systemd on a hybrid host); [] where they
    cannot be made (then nspawn splits the cgroup we are in)."""
    made = []
    with open("/proc/self/cgroup") as f:
        own = [line.rstrip("\n").split(":", 2) for line in f]
    for _, ctrl, path in own:
        if ctrl == "":
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") \
                else "/sys/fs/cgroup"
        elif ctrl == "name=systemd":
            base = "/sys/fs/cgroup/systemd"
        else:
            continue
        d = os.path.join(base + path, name)
        try:
            os.makedirs(d, exist_ok=True)
        except OSError:
            continue
        made.append(d)
    return made
