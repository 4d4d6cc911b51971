"""Process checks shared by the tooling tests: is a pid still running, and
a bounded wait for pids to be gone."""
import time


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pids, within=10.0):
    """Wait until none of pids is alive: True, or False after `within`
    seconds (a safety net; the wait ends as soon as they are gone)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False
