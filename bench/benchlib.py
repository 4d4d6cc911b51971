"""bench/benchlib.py - what bench/run and bench/ab share: the bench daemon
(its configuration, start, pool wait and stop), the runner of the bench
binaries' key=value output, and the /proc readings of CPU time.  Stdlib only.
"""

import ctypes
import os
import resource
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOADGEN = os.path.join(HERE, "loadgen")

# Bench config: on 2 cores a pool of 8 keeps a worker ready for every
# running execution while the zygote refills; max_workers = pool_size so a
# burst never waits for a fork it could have had from the pool.
WORKERS = 8


class BenchError(Exception):
    pass


def run(cmd, timeout):
    """Run a bench binary; return its key=value output as a dict."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError("%s: no result within %ds" % (" ".join(cmd[:3]), timeout))
    if p.returncode != 0:
        raise BenchError("%s failed (exit %d): %s" % (
            " ".join(cmd[:3]), p.returncode, p.stderr.decode("utf-8", "replace").strip()[-2000:]))
    out = {}
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


PR_SET_PDEATHSIG = 1


def die_with_bench(sig=signal.SIGTERM):
    """In a child, before its exec: the kernel sends it sig when the bench
    dies, however it dies (SIGKILL included), so no daemon outlives it."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def stop_on_signals():
    """SIGTERM and SIGHUP end the bench as Ctrl-C does: through its finally
    clauses, which stop the hogs and the daemons (Python's default for them
    exits without running any)."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def proc_stat(pid):
    """From /proc/PID/stat: CPU ticks (utime, stime, and cutime, cstime of
    reaped children) and minor faults (minflt, and cminflt of reaped
    children)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return {"minflt": int(fields[7]), "cminflt": int(fields[8]), "utime": int(fields[11]),
            "stime": int(fields[12]), "cutime": int(fields[13]), "cstime": int(fields[14])}


def proc_cpu_ticks(pid, children=False):
    """utime+stime (and cutime+cstime with children) of pid, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    t = int(fields[11]) + int(fields[12])
    if children:
        t += int(fields[13]) + int(fields[14])
    return t


def children_named(ppid, name):
    try:
        with open("/proc/%d/task/%d/children" % (ppid, ppid)) as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    out = []
    for p in pids:
        try:
            with open("/proc/%d/comm" % p) as f:
                if f.read().strip() == name:
                    out.append(p)
        except OSError:
            pass
    return out


def nofile_limit(pid):
    try:
        with open("/proc/%d/limits" % pid) as f:
            for line in f:
                if line.startswith("Max open files"):
                    return line.split()[3]
    except OSError:
        pass
    return "?"


class Daemon:
    def __init__(self, binary, tmp, name="s", daemon_extra=()):
        self.binary = binary
        self.tmp = tmp
        self.sock = os.path.join(tmp, name + ".sock")
        self.conf = os.path.join(tmp, name + ".conf")
        self.log = os.path.join(tmp, name + ".log")
        lines = ["[daemon]"] + list(daemon_extra) + [
                 "max_workers = %d" % WORKERS,
                 "pool_size = %d" % WORKERS,
                 "max_queue = 4096",
                 "log_level = warning",
                 "shutdown_grace_ms = 1000",
                 "[defaults]",
                 "max_bindings_bytes = 16M",
                 "[ceilings]",
                 "timeout_ms = 600000",
                 "max_bindings_bytes = 16M"]
        if os.geteuid() == 0:
            # as in production: workers drop to nobody inside an empty chroot
            empty = os.path.join(tmp, "empty")
            if not os.path.isdir(empty):
                os.mkdir(empty, 0o555)
            os.chmod(empty, 0o555)
            lines += ["[worker]", "user = nobody", "group = nogroup", "chroot = " + empty]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = None

    def start(self):
        def preexec():
            # 1,000 idle connections need ~1,100 fds in the daemon
            raise_nofile(65536)
            die_with_bench()
        self.err = open(self.log, "wb")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf, "-s", self.sock],
                                     stdin=subprocess.DEVNULL, stdout=self.err, stderr=self.err,
                                     preexec_fn=preexec)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError("sandboxd exited at start-up:\n" + self.stderr())
            if os.path.exists(self.sock):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.sock)
                    s.close()
                    break
                except OSError:
                    s.close()
            time.sleep(0.02)
        else:
            raise BenchError("sandboxd did not start:\n" + self.stderr())
        self.wait_pool()

    def wait_pool(self, timeout=5.0):
        """Until the warm pool is full again (every idle worker forked)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self.describe()
            if d.get("idle_workers", WORKERS) >= WORKERS:
                return d
            time.sleep(0.02)
        return self.describe()

    def describe(self):
        return run([LOADGEN, "describe", "-s", self.sock], 30)

    def zygote(self):
        z = children_named(self.proc.pid, "sandboxd-zygote")
        return z[0] if z else None

    def stderr(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")[-3000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


HOG_MAX_S = 3600          # a hog exits by itself after this, whatever happens


class Hog:
    """One `loadgen hog` per CPU, at the bench's own priority."""

    def __init__(self, ncpu):
        self.ncpu = ncpu
        self.procs = []

    def start(self):
        self.procs = [subprocess.Popen([LOADGEN, "hog", "-n", str(HOG_MAX_S)],
                                       stdin=subprocess.DEVNULL)
                      for _ in range(self.ncpu)]
        time.sleep(0.05)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def daemon_cpu_ticks(d):
    """The CPU of every process of a daemon so far: the supervisor, its
    reaped children (workers) and the zygote."""
    z = d.zygote()
    return proc_cpu_ticks(d.proc.pid, True) + (proc_cpu_ticks(z) if z else 0)
