"""The Debian package sandboxd (make deb) in a booted Debian 12 root, as an
operator installs it: apt-get install of the .deb, a client in the socket's
group, a reinstall over a changed conffile, remove, purge.

Run through `make test-systemd` (tests/systemd/run), which builds the
package first and names it in SANDBOXD_DEB.  A container of its own,
booted from the same cached root as test_systemd.py (nothing of sandboxd
in it), its writes gone with it.  The cases run in order on one
installation, each from where the one before left it.
"""

import os
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import CannotBoot, Machine        # noqa: E402

IMAGE = os.environ.get("SANDBOXD_SYSTEMD_ROOT")
WORKDIR = os.environ.get("SANDBOXD_SYSTEMD_DIR")
DEB = os.environ.get("SANDBOXD_DEB")

if not IMAGE or not WORKDIR or not DEB:
    pytest.skip("run through make test-systemd (tests/systemd/run, with SANDBOXD_DEB)",
                allow_module_level=True)

CONF = "/etc/sandboxd/sandboxd.conf"
SOCK = "/run/sandboxd/sandboxd.sock"
INSIDE = "/usr/src/dist/" + os.path.basename(DEB)
APT = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-y", "-q"]


@pytest.fixture(scope="module")
def m():
    workdir = os.path.join(WORKDIR, "deb")
    os.makedirs(workdir, exist_ok=True)
    machine = Machine(IMAGE, workdir, binds=[(os.path.dirname(os.path.abspath(DEB)),
                                              "/usr/src/dist")])
    try:
        machine.boot()
    except CannotBoot as e:
        machine.shutdown()
        pytest.skip("the container did not boot: %s" % e)
    try:
        yield machine
    finally:
        machine.shutdown()


def state(m, unit):
    return m.show(unit, "ActiveState", "SubState")


def sandboxd_procs(m):
    return [p for p in m.procs() if p.argv and os.path.basename(p.argv[0]) == "sandboxd"]


def exists(m, db, name):
    return m.run("getent", db, name, check=False).returncode == 0


def wait_for(pred, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_install_leaves_the_socket_listening(m):
    assert not exists(m, "passwd", "sandboxd") and not os.path.exists(m.path(CONF))
    r = m.run(*APT, "install", INSIDE, timeout=300)
    assert "Setting up sandboxd (" in r.stdout, r.stdout + r.stderr
    # socket activation: systemd listens, the daemon waits for a client
    assert state(m, "sandboxd.socket") == {"ActiveState": "active", "SubState": "listening"}
    assert state(m, "sandboxd.service")["ActiveState"] == "inactive"
    assert m.out("systemctl", "is-enabled", "sandboxd.socket").strip() == "enabled"
    assert sandboxd_procs(m) == []
    # the users, the chroot, the conffile and what the package lays out
    for u in ("sandboxd", "sandboxd-worker"):
        assert exists(m, "passwd", u) and exists(m, "group", u), u
    assert os.path.isdir(m.path("/var/empty"))
    assert m.out("dpkg-query", "-W", "-f", "${Conffiles}", "sandboxd").split()[0] == CONF
    conf = open(m.path(CONF)).read()
    assert "\nuser = sandboxd-worker\n" in conf and "\ngroup = sandboxd-worker\n" in conf
    assert m.out("sandboxd", "-c", CONF, "--check-config").strip() == "configuration OK"
    assert m.out("sandboxd", "--version").startswith("sandboxd 1.")
    for page in ("man8/sandboxd.8.gz", "man5/sandboxd.conf.5.gz", "man1/sandboxctl.1.gz"):
        assert os.path.isfile(m.path("/usr/share/man/" + page)), page
    assert os.path.isfile(m.path("/usr/share/doc/sandboxd/copyright"))


def test_a_member_of_the_sockets_group_runs_code(m):
    m.run("useradd", "--create-home", "alice")
    m.run("useradd", "--create-home", "mallory")
    m.run("usermod", "-aG", "sandboxd", "alice")
    r = m.run("runuser", "-u", "alice", "--", "sandboxctl", "exec", "-e", "return 1+1")
    assert r.stdout == "2\n", r
    # the connection started the daemon; its workers run as sandboxd-worker
    svc = m.show("sandboxd.service", "ActiveState", "SubState", "MainPID")
    assert (svc["ActiveState"], svc["SubState"]) == ("active", "running"), svc
    worker_uid = int(m.out("id", "-u", "sandboxd-worker"))
    wait_for(lambda: any(p.uid == worker_uid for p in sandboxd_procs(m)),
             "no worker of uid sandboxd-worker in %r" % sandboxd_procs(m))
    # someone outside the group is refused by the socket's mode
    r = m.run("runuser", "-u", "mallory", "--", "sandboxctl", "exec", "-e", "return 1+1",
              check=False)
    assert r.returncode != 0 and "ermission denied" in r.stderr, r


def test_reinstall_keeps_a_changed_conffile(m):
    conf = open(m.path(CONF)).read()
    changed = conf.replace("\nuser = sandboxd-worker\n", "\n# changed here\nuser = sandboxd-worker\n")
    m.run("sh", "-c", "cat > %s" % CONF, input=changed)
    pid = int(m.show("sandboxd.service", "MainPID")["MainPID"])
    # no answer to give (stdin is not a terminal), and none asked: dpkg keeps
    # the changed file because the package's own is unchanged
    r = m.run(*APT, "install", "--reinstall", INSIDE, timeout=300)
    assert "Setting up sandboxd (" in r.stdout, r.stdout + r.stderr
    assert open(m.path(CONF)).read() == changed
    assert not os.path.exists(m.path(CONF + ".dpkg-dist"))
    # an upgrade (here a reinstall) restarts a running daemon on the new binary
    svc = m.show("sandboxd.service", "ActiveState", "MainPID")
    assert svc["ActiveState"] == "active" and int(svc["MainPID"]) not in (0, pid), (pid, svc)
    r = m.run("runuser", "-u", "alice", "--", "sandboxctl", "exec", "-e", "return 1+1")
    assert r.stdout == "2\n", r


def test_remove_stops_it_and_keeps_the_config(m):
    m.run(*APT, "remove", "sandboxd", timeout=300)
    for unit in ("sandboxd.socket", "sandboxd.service"):
        assert state(m, unit)["ActiveState"] == "inactive", unit
    wait_for(lambda: sandboxd_procs(m) == [], "sandboxd processes left: %r" % sandboxd_procs(m))
    assert not os.path.exists(m.path(SOCK))
    assert not os.path.exists(m.path("/usr/sbin/sandboxd"))
    assert os.path.isfile(m.path(CONF)) and "# changed here" in open(m.path(CONF)).read()
    assert exists(m, "passwd", "sandboxd")


def test_purge_removes_config_users_and_runtime_directory(m):
    m.run(*APT, "purge", "sandboxd", timeout=300)
    assert not os.path.exists(m.path("/etc/sandboxd"))
    assert not os.path.exists(m.path("/run/sandboxd"))
    for u in ("sandboxd", "sandboxd-worker"):
        assert not exists(m, "passwd", u) and not exists(m, "group", u), u
    # alice stays, without the group
    assert exists(m, "passwd", "alice")
    assert "sandboxd" not in m.out("id", "-nG", "alice").split()
    r = m.run("dpkg-query", "-W", "-f", "${Status}", "sandboxd", check=False)
    assert r.returncode != 0 or r.stdout.endswith(" not-installed"), r
