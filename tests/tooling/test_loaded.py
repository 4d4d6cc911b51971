"""scripts/loaded, how CI is run on a loaded machine: its hogs spin while
the command runs, the command's exit status is the script's, and no hog or
command outlives the script, however it ends."""
import os
import signal
import subprocess
import time

from procs import gone

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADED = os.path.join(REPO, "scripts", "loaded")


def children(ppid):
    """Pids whose parent is ppid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == ppid:
                out.append(int(d))
    return out


def cmdline(pid):
    """pid's command line; "" once it has exited (a child listed a moment
    ago, such as the script's short-lived subshells, may be gone)."""
    try:
        with open("/proc/%d/cmdline" % pid) as f:
            return f.read()
    except OSError:
        return ""


def hogs_of(p, n, within=60.0):
    """The n hog pids of scripts/loaded process p, once all spin."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        pids = [c for c in children(p.pid) if "python3" in cmdline(c)]
        if len(pids) == n:
            return pids
        time.sleep(0.05)
    raise AssertionError("hogs not started: %r" % children(p.pid))


def test_the_command_runs_beside_the_hogs_and_its_status_is_kept():
    p = subprocess.run([LOADED, "-n", "2", "sh", "-c", "exit 7"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 7
    assert "2 CPU hog(s) running" in p.stderr
    assert "the command exited 7" in p.stderr


def test_hogs_use_cpu_while_the_command_runs_and_stop_with_it():
    p = subprocess.Popen([LOADED, "-n", "1", "sleep", "3"], stderr=subprocess.DEVNULL)
    (hog,) = hogs_of(p, 1)
    with open("/proc/%d/stat" % hog) as f:
        before = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
    time.sleep(1.0)
    with open("/proc/%d/stat" % hog) as f:
        after = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
    assert after > before, "the hog does not spin"
    assert p.wait(timeout=30) == 0
    assert gone([hog])


def test_sigterm_stops_the_command_and_the_hogs():
    p = subprocess.Popen([LOADED, "-n", "2", "sleep", "60"], stderr=subprocess.DEVNULL)
    pids = hogs_of(p, 2)
    sleeper = [c for c in children(p.pid) if c not in pids]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    assert gone(pids + sleeper)


def test_sigkill_of_the_script_leaves_no_hog():
    p = subprocess.Popen([LOADED, "-n", "2", "sleep", "2"], stderr=subprocess.DEVNULL)
    pids = hogs_of(p, 2)
    p.kill()
    p.wait(timeout=10)
    assert gone(pids)


def test_a_bad_count_is_refused():
    p = subprocess.run([LOADED, "-n", "x", "true"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "-n wants a number" in p.stderr
