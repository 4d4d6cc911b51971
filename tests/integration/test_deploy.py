"""Deployment: config checks and reload, peer authorisation, the socket,
systemd socket activation and notifications without PID 1, graceful shutdown,
per-execution logging, `make install`, the systemd units and the Kubernetes
manifests.

Some tests need root (the suite runs as root in CI) or tools from Debian's
systemd, util-linux and strace packages; they skip with the reason when those
are missing.
"""

import grp
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

import sbx
from conftest import REPO, SANDBOXCTL_BIN, SANDBOXD_BIN, merge_config, render_config
from launch import accepts
from sbx import NO_REPLY

SCALE = sbx.SCALE
SANITIZE = os.environ.get("SANDBOXD_SANITIZE") == "1"
T = [{"name": "T", "functions": ["ready", "wait"]}]
IS_ROOT = os.geteuid() == 0


def run_bin(*args, timeout=10, env=None):
    return subprocess.run([SANDBOXD_BIN] + list(args), capture_output=True, text=True,
                          timeout=timeout * SCALE, stdin=subprocess.DEVNULL, env=env)


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout * SCALE
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.02)


def wait_log(d, pattern):
    return d.wait_log(pattern)


def describe(c):
    r = c.call("describe")
    assert r.ok, r
    return r.result


def sighup_and_wait(d, what="configuration reloaded|keeping the running configuration"):
    n = len(re.findall(what, d.stderr))
    d.signal(signal.SIGHUP)
    wait_until(lambda: len(re.findall(what, d.stderr)) > n, 60, "the reload to be logged")


# ------------------------------------------------------------------ --check-config

def test_check_config_sample_file_is_valid():
    p = run_bin("-c", os.path.join(REPO, "sandboxd.conf"), "--check-config")
    assert p.returncode == 0, p
    assert "configuration OK" in p.stdout


@pytest.mark.parametrize("text,line,words", [
    ("[daemon]\nmax_workers = 4\nlog_level = loud\n", 3, "log_level"),
    ("[daemon]\nallow_uids = 0 no-such-user-xyz\n", 2, "no-such-user-xyz"),
    ("# c\n[defaults]\ntimeout_ms = 100\n[ceilings]\ntimeout_ms = 50\n", 3, "timeout_ms"),
    ("[daemon]\nsocket_mode = 0999\n", 2, "socket_mode"),
])
def test_check_config_error_names_file_and_line(tmp_path, text, line, words):
    conf = tmp_path / "site.conf"
    conf.write_text(text)
    p = run_bin("-c", str(conf), "--check-config")
    assert p.returncode != 0, p
    assert "%s:%d:" % (conf, line) in p.stderr, p.stderr
    assert words in p.stderr, p.stderr
    assert "configuration OK" not in p.stdout


def test_check_config_reports_every_error(tmp_path):
    conf = tmp_path / "two.conf"
    conf.write_text("[daemon]\nmax_queue = x\n[worker]\nbogus = 1\n")
    p = run_bin("-c", str(conf), "--check-config")
    assert p.returncode != 0
    assert "%s:2:" % conf in p.stderr and "%s:4:" % conf in p.stderr, p.stderr


# ------------------------------------------------------------------ reload

def test_reload_changes_describe_on_open_connection(daemon_factory):
    d = daemon_factory(defaults={"timeout_ms": 7000})
    c = d.client()
    assert describe(c)["defaults"]["timeout_ms"] == 7000
    d.write_config(merge_config(defaults={"timeout_ms": 8000}, daemon={"max_queue": 99}))
    sighup_and_wait(d)
    desc = describe(c)                          # the same connection still works
    assert desc["defaults"]["timeout_ms"] == 8000, desc
    assert desc["daemon"]["max_queue"] == 99, desc
    assert c.value("return 'after reload'") == "after reload"
    assert re.search(r"<5>sandboxd\[\d+\]: SIGHUP: configuration reloaded from .*sandboxd.conf",
                     d.stderr), d.stderr


def test_reload_bad_file_keeps_old_config(daemon_factory):
    d = daemon_factory(defaults={"timeout_ms": 7000})
    c = d.client()
    c.ping()
    d.write_config(text="[defaults]\ntimeout_ms = 9000\nno_such_key = 1\n")
    sighup_and_wait(d)
    # the error names the file and line, and the old config stays
    assert re.search(r"<3>sandboxd\[\d+\]: %s:3: unknown key 'no_such_key'" %
                     re.escape(d.config_path), d.stderr), d.stderr
    assert re.search(r"<3>sandboxd\[\d+\]: SIGHUP: .* has errors; keeping the running configuration",
                     d.stderr), d.stderr
    assert describe(c)["defaults"]["timeout_ms"] == 7000
    assert c.value("return 5") == 5
    d.write_config(merge_config())              # a good file for teardown


def test_reload_running_executions_keep_their_limits(daemon_factory):
    d = daemon_factory(defaults={"timeout_ms": 60000 * SCALE})
    c = d.client()
    old = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    d.write_config(merge_config(defaults={"timeout_ms": 300}))
    sighup_and_wait(d)
    # a new execution gets the new default ...
    new = c.send_execute("return T.wait()", tools=T, handlers={"T.wait": lambda a: NO_REPLY})
    r = c.wait(new)
    assert r.kind == "timeout", r
    time.sleep(0.5)
    # ... while the one started before the reload kept its 60 s
    c.reply(call, "kept")
    r = c.wait(old)
    assert r.ok and r.result["value"] == "kept", r


def test_reload_allow_lists_apply_to_new_connections(daemon_factory):
    d = daemon_factory()
    c = d.client()
    c.ping()                                    # accepted (peers are checked at accept)
    d.write_config(merge_config(daemon={"allow_uids": "54321"}))
    sighup_and_wait(d)
    c.ping()                                    # not dropped
    with d.client() as other:                   # the error comes unasked
        assert other.next_response().kind == "forbidden"
        assert other.wait_eof()
    d.write_config(merge_config())
    sighup_and_wait(d)
    with d.client() as other:
        other.ping()


# ------------------------------------------------------------------ peers and the socket file

def _connect_as(path, uid, gid, payload, one_line=False):
    """Fork; the child drops to uid/gid, connects, sends payload and reads to EOF
    (or, with one_line, to the first newline).
    Returns (child pid, b"OK " + bytes read, or b"ERR ...")."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                # child: no pytest machinery from here
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10 * SCALE)
            s.connect(path)
            try:
                s.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass                            # refused and closed already
            data = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    # the daemon closed with our later requests unread:
                    # after what it sent, that is the end of the stream too
                    chunk = b""
                if not chunk:
                    break
                data += chunk
                if one_line and b"\n" in data:
                    break
            os.write(w, b"OK " + data)
        except BaseException as e:              # noqa: B036 - report anything
            os.write(w, ("ERR %r" % (e,)).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return pid, out


@pytest.mark.skipif(not IS_ROOT, reason="needs root to connect as another uid")
def test_refused_peer_under_another_uid(daemon_factory):
    nobody = pwd.getpwnam("nobody")
    d = daemon_factory(daemon={"allow_uids": "0", "socket_mode": "0666"})
    os.chmod(d.tmpdir, 0o755)                   # let nobody reach the socket file
    payload = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    pid, out = _connect_as(d.socket_path, nobody.pw_uid, nobody.pw_gid, payload)
    assert out.startswith(b"OK "), out
    lines = out[3:].split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2, "expected exactly one line then EOF: %r" % out
    msg = json.loads(lines[0])
    assert msg["error"]["code"] == -32010 and msg["error"]["data"]["kind"] == "forbidden", msg
    assert msg["id"] is None, msg
    wait_log(d, r"<5>sandboxd\[\d+\]: refused peer uid=%d gid=%d pid=%d\b" %
             (nobody.pw_uid, nobody.pw_gid, pid))
    with d.client() as c:                       # root is still served
        c.ping()
        text = c.call("metrics").result["text"]
        assert "\nsandboxd_refused_peers_total 1\n" in text, text


@pytest.mark.skipif(not IS_ROOT, reason="needs root to connect as another uid")
def test_peer_allowed_by_gid(daemon_factory):
    nobody = pwd.getpwnam("nobody")
    d = daemon_factory(daemon={"allow_uids": "0", "allow_gids": str(nobody.pw_gid),
                               "socket_mode": "0666"})
    os.chmod(d.tmpdir, 0o755)
    pid, out = _connect_as(d.socket_path, nobody.pw_uid, nobody.pw_gid,
                           b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n', one_line=True)
    # the daemon answers and keeps the connection; the child's read times out
    assert b'"result":{}' in out, out
    assert "refused peer" not in d.stderr


@pytest.mark.skipif(not IS_ROOT, reason="needs root to chown the socket to another group")
def test_socket_mode_and_group_applied(daemon_factory):
    group = grp.getgrnam("nogroup")
    d = daemon_factory(daemon={"socket_mode": "0640", "socket_group": "nogroup"})
    st = os.stat(d.socket_path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
    assert st.st_gid == group.gr_gid, (st.st_gid, group.gr_gid)
    # a number is used as is, even without a group of that name (a pod's fsGroup)
    d2 = daemon_factory(daemon={"socket_group": "54321"})
    assert os.stat(d2.socket_path).st_gid == 54321
    assert "socket group" not in d2.stderr, d2.stderr


# ------------------------------------------------------------------ systemd without PID 1

class NotifyListener:
    """A fake $NOTIFY_SOCKET: a datagram socket the test binds."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "sbx-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
            self.dir = None
        else:
            self.dir = tempfile.mkdtemp(prefix="sbxn-", dir="/tmp")
            path = os.path.join(self.dir, "notify")
            self.sock.bind(path)
            self.env = path
        self.messages = []

    def wait_for(self, pred, timeout=10, what="a notification"):
        deadline = time.monotonic() + timeout * SCALE
        while True:
            for i, m in enumerate(self.messages):
                if pred(m):
                    del self.messages[:i + 1]
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %s; got %r" % (what, self.messages))
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                self.messages.append(self.sock.recv(4096).decode())

    def expect(self, first_line, timeout=10):
        return self.wait_for(lambda m: m.split("\n")[0] == first_line, timeout, first_line)

    def close(self):
        self.sock.close()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notify_socket(monkeypatch):
    made = []

    def make(abstract=False, watchdog_usec=None):
        n = NotifyListener(abstract)
        made.append(n)
        monkeypatch.setenv("NOTIFY_SOCKET", n.env)
        if watchdog_usec:
            monkeypatch.setenv("WATCHDOG_USEC", str(watchdog_usec))
        return n

    yield make
    for n in made:
        n.close()


def test_notify_ready_reloading_stopping(daemon_factory, notify_socket):
    n = notify_socket()
    d = daemon_factory(check_stop=False)
    assert n.expect("READY=1") == "READY=1"
    # a good reload: RELOADING=1 (with MONOTONIC_USEC for Type=notify-reload), then READY=1
    d.signal(signal.SIGHUP)
    m = n.expect("RELOADING=1")
    assert re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=\d+", m), repr(m)
    n.expect("READY=1")
    # a bad reload also ends with READY=1 (the old config runs on)
    d.write_config(text="[daemon]\nnope = 1\n")
    d.signal(signal.SIGHUP)
    n.expect("RELOADING=1")
    n.expect("READY=1")
    assert not [m for m in n.messages if "WATCHDOG" in m], "watchdog pings without WATCHDOG_USEC"
    d.signal(signal.SIGTERM)
    n.expect("STOPPING=1")
    assert d.proc.wait(15 * SCALE) == 0, d.stderr
    d.check_sanitizers()


def test_notify_abstract_socket_and_watchdog(daemon_factory, notify_socket):
    n = notify_socket(abstract=True, watchdog_usec=200000)
    d = daemon_factory()
    n.expect("READY=1")
    # pings keep coming (each waited for with a safety net of a minute), at
    # half WATCHDOG_USEC as the daemon's timer is set: the period its log
    # states, not one measured on a machine that may be loaded
    for _ in range(4):
        n.expect("WATCHDOG=1", timeout=60)
    with d.client() as c:
        c.ping()
    d.wait_log(r"systemd watchdog: WATCHDOG=1 every 0\.100 s while workers can be started")


def test_watchdog_pid_of_another_process_is_ignored(daemon_factory, notify_socket, monkeypatch):
    n = notify_socket(watchdog_usec=100000)
    monkeypatch.setenv("WATCHDOG_PID", "1")
    daemon_factory()
    n.expect("READY=1")
    time.sleep(0.4)
    n.messages += [m.decode() for m in _drain(n.sock)]
    assert not [m for m in n.messages if m == "WATCHDOG=1"], n.messages


def test_a_notify_receiver_that_reads_nothing_never_stalls_the_daemon(daemon_factory,
                                                                       notify_socket):
    """$NOTIFY_SOCKET queues 10 datagrams (net.unix.max_dgram_qlen's
    default): with WATCHDOG=1 every 10 ms and a receiver that reads nothing,
    it is full long before the second is over.  The daemon drops what does
    not fit and goes on answering; a blocking send would hang it until the
    receiver reads, which here it never does while the test waits for an
    answer.  Once the receiver reads again, the pings resume."""
    n = notify_socket(watchdog_usec=20000)
    d = daemon_factory()
    n.expect("READY=1")
    time.sleep(1.0)                             # about 100 pings for 10 places
    with d.client(timeout=10 * SCALE) as c:
        for _ in range(3):
            c.ping()
            time.sleep(0.05)                    # more pings, still not read
    _drain(n.sock)
    n.messages = []
    n.expect("WATCHDOG=1", timeout=2)


def _drain(sock):
    out = []
    while select.select([sock], [], [], 0)[0]:
        out.append(sock.recv(4096))
    return out


def scrape_health(c):
    """(describe.state's health fields, the health metrics by name)."""
    st = c.call("describe").result["state"]
    text = c.call("metrics").result["text"]
    metrics = {}
    for line in text.splitlines():
        name = line.split(" ")[0]
        if name in ("sandboxd_can_start_workers", "sandboxd_cannot_start_workers_since_seconds",
                    "sandboxd_worker_start_failures"):
            metrics[name] = float(line.split(" ")[1])
    return {k: st[k] for k in ("can_start_workers", "cannot_start_workers_since",
                               "cannot_start_workers_ms", "worker_start_failures")}, metrics


def test_watchdog_only_while_workers_can_be_started(daemon_factory, notify_socket):
    """WATCHDOG=1 comes every WATCHDOG_USEC/2 while workers can be started;
    while every zygote is killed as it starts, describe and metrics say
    since when they cannot and the pings stop (systemd would restart the
    daemon after WatchdogSec); once a zygote lives, they resume."""
    n = notify_socket(watchdog_usec=200000)
    d = daemon_factory(daemon={"pool_size": 1})
    c = d.client()
    n.expect("READY=1")
    for _ in range(5):                          # every 0.1 s
        n.expect("WATCHDOG=1", timeout=2)
    health, metrics = scrape_health(c)
    assert health == {"can_start_workers": True, "cannot_start_workers_since": None,
                      "cannot_start_workers_ms": None, "worker_start_failures": 0}, health
    assert metrics == {"sandboxd_can_start_workers": 1,
                       "sandboxd_cannot_start_workers_since_seconds": 0,
                       "sandboxd_worker_start_failures": 0}, metrics

    t_down = time.time()
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:                                 # the third failure in a row
        d.kill_zygotes()
        health, metrics = scrape_health(c)
        if not health["can_start_workers"]:
            break
        assert time.monotonic() < deadline, d.stderr[-2000:]
        time.sleep(0.005)
    assert health["worker_start_failures"] >= 3, health
    since = health["cannot_start_workers_since"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", since), health
    assert t_down - 2 <= metrics["sandboxd_cannot_start_workers_since_seconds"] <= time.time()
    assert metrics["sandboxd_can_start_workers"] == 0, metrics
    assert 0 <= health["cannot_start_workers_ms"] < 10000 * SCALE, health
    time.sleep(0.15)                            # a ping already under way
    _drain(n.sock)
    quiet = time.monotonic() + 1.5
    while time.monotonic() < quiet:             # still down: not one ping
        d.kill_zygotes()
        assert not [m for m in _drain(n.sock) if m == b"WATCHDOG=1"], d.stderr[-2000:]
        time.sleep(0.005)
    later, _ = scrape_health(c)
    assert not later["can_start_workers"] and later["cannot_start_workers_since"] == since, later
    assert later["cannot_start_workers_ms"] >= 1500, later
    d.wait_log("WATCHDOG=1 withheld")
    # left alone, the zygote comes back after the back-off; the pings resume
    n.messages.clear()
    n.expect("WATCHDOG=1", timeout=15)
    health, metrics = scrape_health(c)
    assert health["can_start_workers"] and health["cannot_start_workers_since"] is None, health
    assert metrics["sandboxd_can_start_workers"] == 1, metrics
    n.expect("WATCHDOG=1", timeout=60)         # a safety net: the pings go on
    assert c.value("return 'back'") == "back"


def test_socket_activation_with_systemd_socket_activate(tmp_path, notify_socket):
    tool = shutil.which("systemd-socket-activate")
    if not tool:
        pytest.skip("systemd-socket-activate not installed (Debian package systemd)")
    n = notify_socket()
    path = str(tmp_path / "act.sock")
    conf = tmp_path / "c.conf"
    # the config's socket is elsewhere: the passed socket wins
    conf.write_text(render_config(merge_config(daemon={"socket": str(tmp_path / "unused.sock")})))
    errp = tmp_path / "err"
    with open(errp, "wb") as err:
        proc = subprocess.Popen([tool, "-l", path, "-E", "NOTIFY_SOCKET", SANDBOXD_BIN,
                                 "-c", str(conf)],
                                stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_until(lambda: accepts(path), 60, "systemd-socket-activate to listen")
        # systemd-socket-activate starts the daemon on the first connection
        # (the probe above, which the daemon then accepts and sees closed)
        with sbx.Client(path) as c:
            c.ping()
            assert c.value("return 'activated'") == "activated"
        n.expect("READY=1")
        text = errp.read_text()
        assert "using the socket passed by systemd (%s)" % path in text, text
        assert not os.path.exists(tmp_path / "unused.sock")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15 * SCALE)
    text = errp.read_text()
    assert rc == 0, text
    # the socket belongs to systemd: the daemon leaves the file in place
    assert stat.S_ISSOCK(os.stat(path).st_mode), "the daemon removed the passed socket"
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text


def test_socket_activation_rejects_a_non_listening_fd(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text(render_config(merge_config()))
    a, b = socket.socketpair()
    errp = tmp_path / "err"
    with open(errp, "wb") as err:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -c "$1" -s "$2"',
             SANDBOXD_BIN, str(conf), str(tmp_path / "s.sock")],
            stdout=err, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
            pass_fds=(a.fileno(),), preexec_fn=lambda: os.dup2(a.fileno(), 3))
        rc = proc.wait(15 * SCALE)
    a.close()
    b.close()
    assert rc != 0
    assert "LISTEN_FDS: fd 3" in errp.read_text()


# ------------------------------------------------------------------ graceful shutdown

def test_graceful_shutdown_with_executions_in_flight(daemon_factory):
    grace_ms = 4000 * SCALE     # room for the steps before the reply on a loaded machine
    # The loop must outlast the grace on any machine: with a count limit it
    # could meet that first (2e9 reductions in 9 s of the ASan build's CPU,
    # inside its 12 s grace), and its verdict would be reductions_limit.
    d = daemon_factory(check_stop=False, daemon={"shutdown_grace_ms": grace_ms},
                       defaults={"max_reductions": "infinity"},
                       ceilings={"max_reductions": "infinity"})
    c = d.client()
    finishing = c.send_execute("local v = T.wait() return 'finished ' .. v", tools=T,
                               handlers={"T.wait": lambda a: NO_REPLY})
    call = c.wait_deferred(1)
    looping = c.send_execute("T.ready() while true do end", tools=T,
                             handlers={"T.ready": lambda a: True}, timeout_ms=60000 * SCALE)
    c.wait_tool_call(2)
    time.sleep(0.1)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    # no new connections: the socket file goes at once
    wait_until(lambda: not os.path.exists(d.socket_path), 60, "the socket file to go")
    with pytest.raises(OSError):
        sbx.Client(d.socket_path, timeout=1)
    # an execution that finishes within the grace period is answered normally
    time.sleep(0.3)
    c.reply(call, "in time")
    r = c.wait(finishing)
    assert r.ok and r.result["value"] == "finished in time", r
    # one that does not is killed after the grace and answered with an error
    r = c.wait(looping, timeout=grace_ms / 1000 + 10 * SCALE)
    elapsed = time.monotonic() - t0
    assert not r.ok and r.kind == "cancelled", r
    assert "shutting down" in r.message, r
    assert elapsed >= grace_ms / 1000 - 0.1, "killed before the grace period: %.2fs" % elapsed
    assert d.proc.wait(15 * SCALE) == 0, d.stderr
    assert not os.path.exists(d.socket_path)
    d.check_sanitizers()


def test_idle_daemon_with_warm_pool_stops_at_once(daemon_factory):
    # a grace of a day, the most the config takes: a daemon that waited for
    # its idle workers would still run when the safety net (minutes) ends
    d = daemon_factory(check_stop=False, daemon={"pool_size": 4, "shutdown_grace_ms": 86400000})
    wait_until(lambda: len(d.worker_pids()) >= 4, 60, "the warm pool")
    d.signal(signal.SIGTERM)
    try:
        assert d.proc.wait(120 * SCALE) == 0, d.stderr
    except subprocess.TimeoutExpired:
        raise AssertionError("idle workers held the shutdown: %s" % d.stderr[-2000:])
    assert not os.path.exists(d.socket_path)


# ------------------------------------------------------------------ logging

LINE = re.compile(r"^<[3-7]>sandboxd\[\d+\]: \S")


def test_log_lines_have_priority_prefixes_and_one_line_per_execution(daemon_factory):
    d = daemon_factory()
    with d.client() as c:
        r = c.call("execute", {"code": "local t = {} for i = 1, 1000 do t[i] = i end "
                                       "return 'SECRET_VALUE_1'"}, id="req-7")
        assert r.ok, r
        r = c.call("execute", {"code": "error('SECRET_MESSAGE_2')"}, id=8)
        assert r.kind == "runtime_error", r
    text = wait_log(d, r"outcome=runtime_error") and d.stderr
    for line in text.splitlines():
        assert LINE.match(line), "a log line without an sd-daemon priority prefix: %r" % line
    m = re.search(r"<6>sandboxd\[\d+\]: exec conn=\d+ seq=\d+ id=\"req-7\" op=execute outcome=ok "
                  r"wall_ms=[\d.]+ cpu_ms=[\d.]+ heap_peak_bytes=(\d+) tool_calls=0$", text, re.M)
    assert m, text
    assert int(m.group(1)) > 0
    assert re.search(r"exec conn=\d+ seq=\d+ id=8 op=execute outcome=runtime_error wall_ms=", text)
    # code and data only at debug level
    assert "SECRET" not in text, text


def _log_with_journal_stream(tmp_path, stream_of):
    """The daemon's stderr (a file) when JOURNAL_STREAM names the device and
    inode of stream_of(err_path): one execution, then SIGTERM."""
    path = str(tmp_path / "s.sock")
    conf = tmp_path / "c.conf"
    conf.write_text(render_config(merge_config()))
    errp = tmp_path / "err"
    errp.write_bytes(b"")
    st = os.stat(stream_of(str(errp)))
    env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    with open(errp, "ab") as err:
        proc = subprocess.Popen([SANDBOXD_BIN, "-c", str(conf), "-s", path], stdout=err,
                                stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        wait_until(lambda: accepts(path), 60, "the daemon to listen")
        with sbx.Client(path) as c:
            c.call("execute", {"code": "return 1"}, id="j-1")
        wait_until(lambda: 'id="j-1"' in errp.read_text(), 60, "the execution's line")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15 * SCALE)
    assert rc == 0, errp.read_text()
    return errp.read_text(), proc.pid


def test_log_lines_to_the_journal_leave_identifier_and_pid_to_it(tmp_path):
    """Under systemd (JOURNAL_STREAM names stderr) the journal records
    SYSLOG_IDENTIFIER and _PID itself: the supervisor's lines are only the
    priority and the message, not "sandboxd[PID]: " twice in journalctl.  The
    zygote, started without the daemon's environment, keeps its pid."""
    text, pid = _log_with_journal_stream(tmp_path, lambda err: err)
    assert re.search(r'^<6>exec conn=\d+ seq=\d+ id="j-1" op=execute outcome=ok ', text, re.M), text
    assert re.search(r"^<[3-7]>sandboxd \S+ listening on ", text, re.M), text
    for line in text.splitlines():
        assert re.match(r"^<[3-7]>\S", line), "a line without its priority: %r" % line
        assert not line[3:].startswith("sandboxd[%d]" % pid), line
    # A JOURNAL_STREAM inherited by a daemon whose stderr is another file (a
    # shell started from a unit, say) does not count.
    other = tmp_path / "other"
    other.write_bytes(b"")
    text, _ = _log_with_journal_stream(tmp_path, lambda err: str(other))
    assert re.search(r'^<6>sandboxd\[\d+\]: exec conn=\d+ seq=\d+ id="j-1" ', text, re.M), text
    for line in text.splitlines():
        assert LINE.match(line), line


def test_every_execution_has_one_log_line_even_unanswered(daemon_factory):
    """A client that goes away (closed, killed, sandboxctl stopped by
    SIGTERM) leaves no one to answer, but its executions, running and queued,
    still get their line (outcome=disconnected); a request refused with busy
    gets one too (outcome=busy)."""
    d = daemon_factory(daemon={"max_workers": 1, "max_queue": 1})
    a = d.client()
    a.send_raw(b'{"jsonrpc":"2.0","id":"run-1","method":"execute","params":'
               b'{"code":"while true do end"}}\n')
    d.wait_for_workers(1)
    a.send_raw(b'{"jsonrpc":"2.0","id":"queued-2","method":"execute","params":'
               b'{"code":"return 2"}}\n')
    with d.client() as b:
        r = b.call("execute", {"code": "return 3"}, id="busy-3")
        assert r.kind == "busy", r
        # CONTRACT.md section 5: every kind from syntax_error on carries output
        assert r.error["data"]["output"] == "" and r.error["data"]["output_truncated"] is False, r
    wait_until(lambda: "queued" in json.dumps(describe(d.client())) and
               describe(d.client())["state"]["queued"] == 1, 60, "the queued execution")
    a.close()
    for rid, outcome in (("run-1", "disconnected"), ("queued-2", "disconnected"),
                         ("busy-3", "busy")):
        wait_log(d, r'exec conn=\d+ seq=\d+ id="%s" op=execute outcome=%s wall_ms=' % (rid, outcome))
    d.assert_no_leftovers()
    for rid in ("run-1", "queued-2", "busy-3"):
        n = len(re.findall(r'id="%s" op=' % rid, d.stderr))
        assert n == 1, "%d log lines for %s:\n%s" % (n, rid, d.stderr)


def test_debug_level_logs_code_and_data(daemon_factory):
    d = daemon_factory(daemon={"log_level": "debug"})
    with d.client() as c:
        assert c.value("return 'SECRET_VALUE_3'") == "SECRET_VALUE_3"
    text = wait_log(d, r"SECRET_VALUE_3.*\n(.*\n)*.*SECRET_VALUE_3") and d.stderr
    assert re.search(r"<7>sandboxd\[\d+\]: exec conn=\d+ seq=\d+ execute code=\"return "
                     r"'SECRET_VALUE_3'\"", text), text


# ------------------------------------------------------------------ make install and the units

def build_dir():
    """O for make: the directory of the binaries under test, relative to the repo."""
    return os.path.relpath(os.path.dirname(SANDBOXD_BIN), REPO)


EXPECTED_FILES = {
    "usr/sbin/sandboxd": 0o755,
    "usr/bin/sandboxctl": 0o755,
    "etc/sandboxd/sandboxd.conf": 0o644,
    "usr/lib/systemd/system/sandboxd.service": 0o644,
    "usr/lib/systemd/system/sandboxd.socket": 0o644,
    "usr/lib/sysusers.d/sandboxd.conf": 0o644,
    "usr/lib/tmpfiles.d/sandboxd.conf": 0o644,
    "usr/share/man/man8/sandboxd.8": 0o644,
    "usr/share/man/man5/sandboxd.conf.5": 0o644,
    "usr/share/man/man1/sandboxctl.1": 0o644,
}


def make_install(dest, **env):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run(["make", "--no-print-directory", "-C", REPO, "install",
                           "O=" + build_dir(), "SANITIZE=" + os.environ.get("SANDBOXD_SANITIZE", "0"),
                           "DESTDIR=" + dest, "PREFIX=/usr"],
                          capture_output=True, text=True, env=e, timeout=300)


@pytest.mark.skipif(SANITIZE, reason="tests the Makefile, not the daemon: the normal build's run covers it")
def test_make_install_into_destdir(tmp_path):
    dest = str(tmp_path / "root")
    p = make_install(dest)
    assert p.returncode == 0, p.stdout + p.stderr
    found = {}
    for dirpath, _, files in os.walk(dest):
        for f in files:
            full = os.path.join(dirpath, f)
            found[os.path.relpath(full, dest)] = stat.S_IMODE(os.stat(full).st_mode)
    assert found == EXPECTED_FILES, found
    with open(os.path.join(dest, "usr/sbin/sandboxd"), "rb") as a, open(SANDBOXD_BIN, "rb") as b:
        assert a.read() == b.read()
    with open(os.path.join(REPO, "sandboxd.conf")) as a, \
            open(os.path.join(dest, "etc/sandboxd/sandboxd.conf")) as b:
        assert a.read() == b.read()
    unit = open(os.path.join(dest, "usr/lib/systemd/system/sandboxd.service")).read()
    assert "ExecStart=/usr/sbin/sandboxd -c /etc/sandboxd/sandboxd.conf\n" in unit
    for path in found:                          # DESTDIR never leaks into a file
        if not path.startswith("usr/sbin") and not path.startswith("usr/bin"):
            assert dest not in open(os.path.join(dest, path), errors="replace").read(), path
    p = subprocess.run([os.path.join(dest, "usr/sbin/sandboxd"), "-c",
                        os.path.join(dest, "etc/sandboxd/sandboxd.conf"), "--check-config"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p
    # a second install keeps the operator's config and puts the sample beside it
    conf = os.path.join(dest, "etc/sandboxd/sandboxd.conf")
    with open(conf, "w") as f:
        f.write("[daemon]\nmax_workers = 2\n")
    p = make_install(dest)
    assert p.returncode == 0, p.stdout + p.stderr
    assert open(conf).read() == "[daemon]\nmax_workers = 2\n"
    assert os.path.exists(conf + ".dist")


def test_install_fails_clearly_without_binaries(tmp_path):
    p = subprocess.run([os.path.join(REPO, "scripts/install")], capture_output=True, text=True,
                       env=dict(os.environ, O=str(tmp_path / "nobuild"),
                                DESTDIR=str(tmp_path / "d"), PREFIX="/usr"))
    assert p.returncode != 0
    assert "sandboxd is missing" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "d")


def unit_settings(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


@pytest.fixture(scope="module")
def installed_prefix():
    """scripts/install with a real (temporary) PREFIX and SYSCONFDIR, so the
    installed units name files that exist."""
    tmp = tempfile.mkdtemp(prefix="sbxinst-", dir="/tmp")
    env = dict(os.environ, O=os.path.dirname(SANDBOXD_BIN), PREFIX=tmp + "/usr",
               SYSCONFDIR=tmp + "/etc", DESTDIR="")
    p = subprocess.run([os.path.join(REPO, "scripts/install")], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def test_units_pass_systemd_analyze_verify(installed_prefix):
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.skip("systemd-analyze not installed (Debian package systemd)")
    if os.geteuid() != 0 and not os.path.isdir("/run/systemd"):
        # verify creates /run/systemd/ first; only root can where systemd
        # never ran (a container or a root entered without booting it)
        pytest.skip("systemd-analyze verify as non-root needs /run/systemd, absent here")
    units = os.path.join(installed_prefix, "usr/lib/systemd/system")
    p = subprocess.run([tool, "verify", os.path.join(units, "sandboxd.socket"),
                        os.path.join(units, "sandboxd.service")],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANPATH=os.path.join(installed_prefix, "usr/share/man")))
    # verify only warns about unknown keys: any output at all is a failure
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr


def test_unit_settings():
    svc = unit_settings(os.path.join(REPO, "systemd/sandboxd.service"))
    sock = unit_settings(os.path.join(REPO, "systemd/sandboxd.socket"))
    assert svc["Type"] == ["notify"] and svc["NotifyAccess"] == ["main"]
    assert svc["KillMode"] == ["mixed"], "SIGTERM must reach the daemon only (graceful stop)"
    assert "seccomp" in svc["SystemCallFilter"][0].split()
    assert "@system-service" in svc["SystemCallFilter"][0].split()
    assert svc["NoNewPrivileges"] == ["yes"] and svc["ProtectSystem"] == ["strict"]
    assert svc["RestrictAddressFamilies"] == ["AF_UNIX"]
    assert svc["RuntimeDirectoryPreserve"] == ["yes"], "the socket node lives in /run/sandboxd"
    assert sock["ListenStream"] == ["/run/sandboxd/sandboxd.sock"]
    assert sock["Accept"] == ["no"]
    # the socket unit and the built-in default agree on the path
    assert "socket = /run/sandboxd/sandboxd.sock" in open(os.path.join(REPO, "sandboxd.conf")).read()


def _syscall_sets():
    out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                         text=True).stdout
    groups, cur = {}, None
    for line in out.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("@") and not line.startswith(" "):
            cur = s.split()[0]
            groups[cur] = []
        elif cur:
            groups[cur].append(s.split()[0])
    return groups


def _expand(groups, names):
    allowed, todo, seen = set(), list(names), set()
    while todo:
        n = todo.pop()
        if n.startswith("@"):
            if n not in seen:
                seen.add(n)
                todo += groups.get(n, [])
        else:
            allowed.add(n)
    return allowed


@pytest.mark.skipif(SANITIZE, reason="the sanitizer runtime makes calls the real daemon does not")
@pytest.mark.skipif(not IS_ROOT, reason="needs root for the worker uid drop and chroot")
def test_daemon_syscalls_fit_the_units_filter(tmp_path):
    """Every system call the daemon, the zygote and the workers make (root, uid
    drop, chroot, executions, a timeout, reload, stop) is allowed by the unit's
    SystemCallFilter, which systemd would otherwise answer with EPERM."""
    if not shutil.which("strace") or not shutil.which("systemd-analyze"):
        pytest.skip("needs strace and systemd-analyze")
    line = unit_settings(os.path.join(REPO, "systemd/sandboxd.service"))["SystemCallFilter"][0]
    allowed = _expand(_syscall_sets(), line.split())
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o555)
    trace = tmp_path / "trace"
    sock = str(tmp_path / "s.sock")
    conf = tmp_path / "c.conf"
    conf.write_text(render_config(merge_config(
        daemon={"pool_size": 1},
        worker={"user": "nobody", "group": "nogroup", "chroot": str(empty)})))
    proc = subprocess.Popen(["strace", "-f", "-qq", "-o", str(trace), SANDBOXD_BIN,
                             "-c", str(conf), "-s", sock],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    daemon = None
    try:
        wait_until(lambda: accepts(sock), 10 * SCALE, "the traced daemon")
        daemon = [int(p) for p in os.listdir("/proc") if p.isdigit() and
                  _ppid(p) == proc.pid][0]
        time.sleep(0.3)
        with sbx.Client(sock) as c:
            assert c.value("print('x') local t = {} for i = 1, 1e5 do t[i] = i end return #t") \
                == 100000
            assert c.execute("while true do end", timeout_ms=300).kind == "timeout"
            assert c.execute("error('x')").kind == "runtime_error"
            os.kill(daemon, signal.SIGHUP)
            time.sleep(0.3)
            c.ping()
    finally:
        os.kill(daemon or proc.pid, signal.SIGTERM)
        proc.wait(30 * SCALE)
    used = set()
    for ln in open(trace):
        m = re.match(r"^\d+\s+([a-z0-9_]+)\(", ln)
        if m:
            used.add(m.group(1))
    assert "seccomp" in used and "chroot" in used and "setresuid" in used, sorted(used)
    assert used <= allowed, "system calls outside SystemCallFilter=%s: %s" % (
        line, sorted(used - allowed))


@pytest.mark.skipif(not IS_ROOT, reason="the capability set matters only for a root daemon")
def test_daemon_works_with_the_units_capabilities(tmp_path):
    """Run the daemon as root with only the unit's CapabilityBoundingSet and
    no_new_privs (setpriv), as systemd would: workers still switch uid, get
    reniced, are killed on timeout, and the daemon stops cleanly."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) not installed")
    caps = unit_settings(os.path.join(REPO, "systemd/sandboxd.service"))["CapabilityBoundingSet"][0]
    spec = ",".join(["-all"] + ["+" + c.lower()[4:] for c in caps.split()])
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o555)
    os.chmod(tmp_path, 0o755)
    sock = str(tmp_path / "s.sock")
    conf = tmp_path / "c.conf"
    conf.write_text(render_config(merge_config(
        daemon={"pool_size": 0, "socket_group": "nogroup"},
        worker={"user": "nobody", "group": "nogroup", "chroot": str(empty)})))
    errp = tmp_path / "err"
    with open(errp, "wb") as err:
        proc = subprocess.Popen([setpriv, "--no-new-privs", "--inh-caps=-all",
                                 "--bounding-set=" + spec, SANDBOXD_BIN, "-c", str(conf),
                                 "-s", sock],
                                stdout=err, stderr=err, start_new_session=True)
    try:
        wait_until(lambda: accepts(sock), 60, "the daemon; stderr: %s" % errp.read_text())
        assert os.stat(sock).st_gid == grp.getgrnam("nogroup").gr_gid    # CAP_CHOWN
        time.sleep(0.2)
        with sbx.Client(sock) as c:
            i = c.send_execute("T.ready() while true do end", tools=T,
                               handlers={"T.ready": lambda a: True}, timeout_ms=1000 * SCALE)
            c.wait_tool_call(1)
            kids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == proc.pid]
            workers = [p for p in kids if _comm(p) == "sandboxd-worker"]
            assert workers, kids
            # The ids from status, not the owner of /proc/PID (root for a
            # process that is not dumpable); a worker another fork has just
            # made may not have switched yet, so every worker gets a moment.
            nobody = pwd.getpwnam("nobody").pw_uid
            wait_until(lambda: all(_uids(p) in (None, [nobody] * 4) for p in workers), 60,
                       "workers running as nobody: %s" % [(p, _uids(p)) for p in workers])
            assert _uids(workers[0]) == [nobody] * 4                        # CAP_SETUID
            root, want = os.stat("/proc/%d/root" % workers[0]), os.stat(str(empty))
            assert (root.st_dev, root.st_ino) == (want.st_dev, want.st_ino)  # CAP_SYS_CHROOT
            assert os.getpriority(os.PRIO_PROCESS, workers[0]) == 10        # CAP_SYS_NICE
            r = c.wait(i)
            assert r.kind == "timeout", r                                    # CAP_KILL
            assert c.value("return 6 * 7") == 42
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15 * SCALE)
    assert rc == 0, errp.read_text()
    assert not os.path.exists(sock)


def _ppid(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _uids(pid):
    """The real, effective, saved and file-system uids of pid, or None."""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return [int(x) for x in line.split()[1:5]]
    except (OSError, ValueError):
        return None
    return None


def _comm(pid):
    try:
        with open("/proc/%s/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


# ------------------------------------------------------------------ Kubernetes manifests

def test_kubernetes_manifests():
    yaml = pytest.importorskip("yaml", reason="python3-yaml not installed")
    k8s = os.path.join(REPO, "deploy/k8s")
    docs = {}
    for name in ("sidecar.yaml", "daemonset.yaml"):
        with open(os.path.join(k8s, name)) as f:
            docs[name] = [d for d in yaml.safe_load_all(f) if d]
        for d in docs[name]:
            assert d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"), d

    def one(name, kind):
        found = [d for d in docs[name] if d["kind"] == kind]
        assert len(found) == 1, (name, kind)
        return found[0]

    def check_config(name, pod):
        cms = [d for d in docs[name] if d["kind"] == "ConfigMap"]
        assert cms, "%s: no ConfigMap with sandboxd.conf" % name
        text = cms[0]["data"]["sandboxd.conf"]
        p = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
        p.write(text)
        p.close()
        try:
            r = run_bin("-c", p.name, "--check-config")
            assert r.returncode == 0, "%s: its sandboxd.conf does not check: %s" % (name, r.stderr)
        finally:
            os.unlink(p.name)
        m = re.search(r"^socket\s*=\s*(\S+)", text, re.M)
        return m.group(1)

    # sidecar: the daemon and the agent share the socket through an emptyDir
    dep = one("sidecar.yaml", "Deployment")
    pod = dep["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    sock_path = check_config("sidecar.yaml", pod)
    containers = {c["name"]: c for c in pod["containers"] + pod.get("initContainers", [])}
    sbxd = containers["sandboxd"]
    mounts = {m["name"]: m["mountPath"] for m in sbxd["volumeMounts"]}
    shared = [n for n, v in vols.items() if "emptyDir" in v and n in mounts]
    assert shared, "no emptyDir shared with the sandboxd container"
    assert os.path.dirname(sock_path) == mounts[shared[0]]
    agents = [c for n, c in containers.items() if n != "sandboxd" and
              any(m["name"] == shared[0] for m in c.get("volumeMounts", []))]
    assert agents, "no other container mounts the socket volume"
    assert sbxd.get("readinessProbe") and sbxd["resources"]["limits"]["memory"]

    # DaemonSet: one daemon per node, the socket in a hostPath directory
    ds = one("daemonset.yaml", "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    sock_path = check_config("daemonset.yaml", pod)
    vols = {v["name"]: v for v in pod["volumes"]}
    sbxd = [c for c in pod["containers"] if c["name"] == "sandboxd"][0]
    mounts = {m["name"]: m["mountPath"] for m in sbxd["volumeMounts"]}
    host = [n for n, v in vols.items() if "hostPath" in v and n in mounts]
    assert host and os.path.dirname(sock_path) == mounts[host[0]]
    assert vols[host[0]]["hostPath"]["type"] == "DirectoryOrCreate"
    assert sbxd["resources"]["limits"]["memory"]


# ------------------------------------------------------------------ scripts/install-deps

def _install_deps_as_nobody(with_sudo):
    """Run a copy of scripts/install-deps as nobody, without a terminal, on a
    PATH where dpkg-query reports every package missing (the one stand-in:
    which packages are installed is the machine's, not the test's)."""
    from conftest import runnable_copy
    import pathlib
    tmp = tempfile.mkdtemp(prefix="sbxd-deps-", dir="/tmp")     # nobody can enter it
    os.chmod(tmp, 0o755)
    bindir = pathlib.Path(tmp) / "bin"
    bindir.mkdir()
    (bindir / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    for tool in ("sh", "id", "grep", "cat"):
        os.symlink(shutil.which(tool), str(bindir / tool))
    if with_sudo:
        os.symlink(shutil.which("sudo"), str(bindir / "sudo"))
    os.chmod(str(bindir / "dpkg-query"), 0o755)
    script = runnable_copy(os.path.join(REPO, "scripts/install-deps"))
    listed = subprocess.run([script, "--list"], capture_output=True, text=True, timeout=30,
                            env={"PATH": str(bindir)}).stdout.split()
    nobody = pwd.getpwnam("nobody")
    p = subprocess.run(["/bin/sh", script], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL, env={"PATH": str(bindir)},
                       user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])
    shutil.rmtree(tmp)
    return listed, p


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the script as nobody")
@pytest.mark.parametrize("with_sudo", [False, True], ids=["no-sudo", "sudo-cannot-ask"])
def test_install_deps_without_root_prints_the_command(with_sudo):
    """Not root, and sudo missing or unable to ask (no terminal; nobody is in
    no sudoers file): exit 1 with the exact apt-get line to run as root."""
    if with_sudo and not shutil.which("sudo"):
        pytest.skip("sudo is not installed here")
    listed, p = _install_deps_as_nobody(with_sudo)
    assert "man-db" in listed and "jq" in listed, listed
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    why = "sudo needs a password but there is no terminal" if with_sudo else \
        "sudo is not installed"
    assert why in p.stderr, p.stderr
    want = "apt-get update && apt-get install -y --no-install-recommends " + " ".join(listed)
    assert ("\n    %s\n" % want) in p.stderr, p.stderr
    assert "Run this as root" in p.stderr, p.stderr


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the script as nobody")
def test_install_deps_through_sudo_is_noninteractive(tmp_path):
    """Not root, sudo needs no password: apt-get must get
    DEBIAN_FRONTEND=noninteractive on its command line, since sudo's
    env_reset drops it from the environment (debconf would then fall back to
    a frontend that can wait for an answer).  sudo is a stand-in here that
    does what env_reset does, keeping PATH only; apt-get one that records
    what it got (the machine's packages are not the test's to change)."""
    from conftest import runnable_copy
    tmp = tempfile.mkdtemp(prefix="sbxd-deps-", dir="/tmp")
    try:
        os.chmod(tmp, 0o777)
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        record = os.path.join(tmp, "apt-get.log")
        stand_ins = {
            "dpkg-query": "#!/bin/sh\nexit 1\n",
            "sudo": '#!/bin/sh\n[ "$1" = -n ] && shift\n[ "$1" = true ] && exit 0\n'
                    'exec /usr/bin/env -i PATH="$PATH" "$@"\n',
            "apt-get": '#!/bin/sh\necho "$1 DEBIAN_FRONTEND=${DEBIAN_FRONTEND-unset}" >> %s\n'
                       % record,
        }
        for name, text in stand_ins.items():
            with open(os.path.join(bindir, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(bindir, name), 0o755)
        for tool in ("sh", "id", "grep", "cat", "env"):
            os.symlink(shutil.which(tool), os.path.join(bindir, tool))
        script = runnable_copy(os.path.join(REPO, "scripts/install-deps"))
        nobody = pwd.getpwnam("nobody")
        p = subprocess.run(["/bin/sh", script], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL, env={"PATH": bindir},
                           user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])
        assert p.returncode == 0, (p.stdout, p.stderr)
        with open(record) as f:
            calls = f.read().splitlines()
    finally:
        shutil.rmtree(tmp)
    assert calls == ["update DEBIAN_FRONTEND=noninteractive",
                     "install DEBIAN_FRONTEND=noninteractive"], calls


# ------------------------------------------------------------------ the first make

def _fresh_checkout(dest):
    files = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True,
                           check=True).stdout.split(b"\0")
    for f in filter(None, files):
        src, dst = os.path.join(REPO, os.fsdecode(f)), os.path.join(dest, os.fsdecode(f))
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)


@pytest.mark.skipif(SANITIZE, reason="tests the Makefile, not the daemon: the normal build's run covers it")
def test_first_make_on_a_fresh_machine(tmp_path):
    """A fresh machine has no pkg-config until scripts/install-deps ran: the
    build flags must not be taken before it, the second make has nothing to
    do, and the unit tests' objects are not thrown away (so they are not
    compiled again).  Modelled with a pkg-config that fails until the
    checkout's install-deps (here a stand-in) has run."""
    if shutil.which("git") is None or not os.path.isdir(os.path.join(REPO, ".git")) and \
            not os.path.isfile(os.path.join(REPO, ".git")):
        pytest.skip("needs a git checkout")
    tree = str(tmp_path / "tree")
    _fresh_checkout(tree)
    shim = tmp_path / "shim"
    shim.mkdir()
    marker = tmp_path / "installed"
    (shim / "pkg-config").write_text(
        '#!/bin/sh\n[ -e %s ] || { echo "pkg-config: No such file or directory" >&2; exit 127; }\n'
        'exec /usr/bin/pkg-config "$@"\n' % marker)
    os.chmod(str(shim / "pkg-config"), 0o755)
    with open(os.path.join(tree, "scripts/install-deps"), "w") as f:
        f.write("#!/bin/sh\ntouch %s\n" % marker)
    env = dict(os.environ, PATH="%s:%s" % (shim, os.environ.get("PATH", "")))
    # make exports its command-line variables to recipes (the ASan pass runs
    # under O=build/asan SANITIZE=1): the fresh machine has none of them.
    for var in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "O", "SANITIZE", "EXTRA_CPPFLAGS"):
        env.pop(var, None)

    def make(*args):
        return subprocess.run(["make", "--no-print-directory", "-C", tree, "-j2"] + list(args),
                              capture_output=True, text=True, env=env, timeout=900 * SCALE)

    unit = "build/tests/test_outq"
    p = make("all", unit)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "pkg-config" not in p.stderr, p.stderr
    with open(os.path.join(tree, "build/.flags")) as f:
        assert "-llua5.3" in f.read()
    for target in ("all", unit):
        q = make("-q", target)
        assert q.returncode == 0, "make %s would rebuild:\n%s" % (
            target, make("-n", target).stdout)


# ------------------------------------------------------------------ make run and terminals

def _run_dir(tmp):
    """An output directory for scripts/run with the binaries under test."""
    o = os.path.join(tmp, "o")
    os.mkdir(o)
    os.symlink(SANDBOXD_BIN, os.path.join(o, "sandboxd"))
    os.symlink(SANDBOXCTL_BIN, os.path.join(o, "sandboxctl"))
    return o


def _run_config(tmp):
    conf = os.path.join(tmp, "sandboxd.conf")
    with open(conf, "w") as f:
        f.write(render_config(merge_config(daemon={"pool_size": 1})))
    return conf


def _start_run(tmp, **kw):
    """scripts/run (what make run runs) from a directory holding the test's
    sandboxd.conf, as make run does from the checkout."""
    _run_config(tmp)
    return subprocess.Popen([os.path.join(REPO, "scripts/run"), _run_dir(tmp)], cwd=tmp, **kw)


def test_make_run_says_listening_only_once_it_listens(tmp_path):
    tmp = str(tmp_path)
    proc = _start_run(tmp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                      stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        first = proc.stdout.readline().decode()
        assert first.startswith("sandboxd: listening on "), first
        sock = first.split("listening on ", 1)[1].strip()
        assert sock == os.path.join(tmp, "o", "sandboxd.sock"), sock
        with sbx.Client(sock) as c:         # at once: it listens
            c.ping()
        assert "try:" in proc.stdout.readline().decode()
        # a second make run on the same socket fails, and says nothing of listening
        again = subprocess.run([os.path.join(REPO, "scripts/run"), os.path.join(tmp, "o")],
                               cwd=tmp, capture_output=True, text=True, timeout=30 * SCALE,
                               stdin=subprocess.DEVNULL)
        assert again.returncode == 1, again
        assert "listening on" not in again.stdout, again.stdout
        assert "another daemon is already listening" in again.stderr, again.stderr
    finally:
        proc.send_signal(signal.SIGINT)         # as Ctrl-C reaches the shell of make run
        rc = proc.wait(30 * SCALE)
    assert rc == 0, rc
    assert not os.path.exists(os.path.join(tmp, "o", "sandboxd.sock"))


def _stat_fields(pid):
    """(state, ppid, pgrp, session, tty_nr) of pid."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[4])


def _with_terminal(argv, log, **kw):
    """Start argv as the leader of a new session whose controlling terminal
    is a fresh pty (stdin); stdout and stderr to log.  Returns (proc, master)."""
    import fcntl
    import termios
    master, slave = os.openpty()

    def take_tty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=log, stderr=log, start_new_session=True,
                            preexec_fn=take_tty, **kw)
    os.close(slave)
    return proc, master


def _daemon_children(pid, comm):
    from conftest import children_of
    return [c[0] for c in children_of(pid) if c[1] == comm and c[2] != "Z"]


def test_terminal_signals_reach_the_daemon_only(tmp_path):
    """Started from a terminal: the zygote and the workers are in a session
    of their own without it, so Ctrl-C (SIGINT to the terminal's foreground
    group) and a hangup reach the supervisor only; Ctrl-C stops it."""
    tmp = str(tmp_path)
    conf = _run_config(tmp)
    sock = os.path.join(tmp, "s.sock")
    log = open(os.path.join(tmp, "log"), "wb")
    proc, master = _with_terminal([SANDBOXD_BIN, "-c", conf, "-s", sock], log)
    try:
        wait_until(lambda: accepts(sock), 60, "the socket")
        zyg = wait_until(lambda: _daemon_children(proc.pid, "sandboxd-zygote"), 60, "the zygote")
        worker = wait_until(lambda: _daemon_children(zyg[0], "sandboxd-worker") or
                            _daemon_children(proc.pid, "sandboxd-worker"), 60, "a pool worker")
        d = _stat_fields(proc.pid)
        assert d[3] == proc.pid and d[4] != 0, d          # the test set this up
        for pid in zyg + worker:
            st = _stat_fields(pid)
            assert st[4] == 0, "process %d has the terminal as controlling tty: %r" % (pid, st)
            assert st[3] != d[3] and st[2] != d[2], (pid, st, d)
        os.write(master, b"\x03")                           # Ctrl-C
        assert proc.wait(30 * SCALE) == 0
        text = open(os.path.join(tmp, "log"), errors="replace").read()
        assert "zygote died" not in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        log.close()


def test_closing_the_terminal_stops_the_daemon_but_sighup_reloads(tmp_path):
    """SIGHUP reloads while the controlling terminal is there (an operator's
    kill -HUP); once the terminal is gone (the window closed), the SIGHUP of
    the hangup stops the daemon, exit status 0."""
    tmp = str(tmp_path)
    conf = _run_config(tmp)
    sock = os.path.join(tmp, "s.sock")
    logpath = os.path.join(tmp, "log")
    log = open(logpath, "wb")
    proc, master = _with_terminal([SANDBOXD_BIN, "-c", conf, "-s", sock], log)
    try:
        wait_until(lambda: accepts(sock), 60, "the socket")
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(lambda: "configuration reloaded" in open(logpath).read(), 60, "the reload")
        assert proc.poll() is None
        os.close(master)                                    # the terminal goes away
        master = None
        assert proc.wait(30 * SCALE) == 0
        text = open(logpath).read()
        assert "controlling terminal is gone; stopping" in text, text
        assert not os.path.exists(sock)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if master is not None:
            os.close(master)
        log.close()


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _wchan(pid):
    """Where in the kernel pid sleeps ("do_wait": in wait(2))."""
    try:
        with open("/proc/%d/wchan" % pid) as f:
            return f.read()
    except OSError:
        return ""


def test_ctrl_c_in_a_terminal_ends_make_run_with_the_daemons_status(tmp_path):
    """Ctrl-C in make run's terminal, while its shell waits for the daemon:
    the daemon stops gracefully and the shell exits with its status (0), so
    make reports no error; not the 130 of the shell's interrupted wait."""
    tmp = str(tmp_path)
    _run_config(tmp)
    with open(os.path.join(tmp, "Makefile"), "w") as f:      # make run's rule
        f.write("run:\n\t@%s %s\n" % (os.path.join(REPO, "scripts/run"), _run_dir(tmp)))
    logpath = os.path.join(tmp, "log")
    log = open(logpath, "wb")
    proc, master = _with_terminal(["make", "run"], log, cwd=tmp)
    try:
        wait_until(lambda: "listening on" in open(logpath, errors="replace").read(), 60,
                   "make run to be listening")
        [shell] = _children(proc.pid)
        daemon = os.path.basename(os.path.realpath(SANDBOXD_BIN))[:15]

        def waits_for_the_daemon():
            """The shell blocked in its wait (dash: sigsuspend) with the
            daemon its one live child (the readiness listener gone, the lines
            printed): where a user's Ctrl-C finds it."""
            # read_proc_stat: a child listed a moment ago (the readiness
            # listener, exiting) may be gone, and then it is not live
            from conftest import read_proc_stat
            kids = [read_proc_stat(c) for c in _children(shell)]
            live = [k[0] for k in kids if k is not None and k[1] != "Z"]
            return (_wchan(shell).startswith(("do_wait", "sigsuspend")) and live == [daemon])
        wait_until(waits_for_the_daemon, 60, "make run to wait for the daemon")
        os.write(master, b"\x03")                           # Ctrl-C
        proc.wait(30 * SCALE)
        text = open(logpath, errors="replace").read()
        assert "stopped" in text, text
        assert "Error" not in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        log.close()


def test_closing_the_terminal_stops_make_run(tmp_path):
    """make run's shell, the session's leader here, gets the hangup; the
    daemon stops and the run ends."""
    tmp = str(tmp_path)
    _run_config(tmp)
    logpath = os.path.join(tmp, "log")
    log = open(logpath, "wb")
    proc, master = _with_terminal([os.path.join(REPO, "scripts/run"), _run_dir(tmp)], log,
                                  cwd=tmp)
    try:
        wait_until(lambda: "listening on" in open(logpath, errors="replace").read(), 60,
                   "make run to be listening")
        daemons = _daemon_children(proc.pid, os.path.basename(os.path.realpath(SANDBOXD_BIN))[:15])
        os.close(master)
        master = None
        proc.wait(30 * SCALE)
        text = open(logpath, errors="replace").read()
        assert "stopped" in text, text
        for pid in daemons:
            wait_until(lambda: not os.path.exists("/proc/%d" % pid), 60, "the daemon to exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if master is not None:
            os.close(master)
        log.close()


def test_signals_ignored_at_start_stay_ignored(tmp_path):
    """nohup sandboxd (SIGHUP ignored) survives its terminal and does not
    reload; a shell's background job (SIGINT ignored) is not stopped by the
    terminal's Ctrl-C.  The loop reads signals from a signalfd, where even an
    ignored signal would arrive, so the daemon must ask at start."""
    tmp = str(tmp_path)
    conf = _run_config(tmp)
    sock = os.path.join(tmp, "s.sock")
    logpath = os.path.join(tmp, "log")

    def ignore():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with open(logpath, "wb") as log:
        proc = subprocess.Popen([SANDBOXD_BIN, "-c", conf, "-s", sock], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True, preexec_fn=ignore)
    try:
        wait_until(lambda: accepts(sock), 60, "the socket")
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGHUP):
            os.kill(proc.pid, sig)
        with sbx.Client(sock) as c:             # the loop has read its signalfd since
            c.ping()
            c.ping()
        time.sleep(0.2)
        text = open(logpath).read()
        assert proc.poll() is None, text
        assert "SIGHUP" not in text and "stopping" not in text, text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30 * SCALE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_readme_lists_every_package_install_deps_installs(tmp_path):
    """The README's Requirements table names each package (with why)."""
    bindir = tmp_path / "bin"          # no node, no elixir: every conditional package too
    bindir.mkdir()
    for tool in ("sh", "grep", "cat", "id"):
        os.symlink(shutil.which(tool), str(bindir / tool))
    p = subprocess.run([os.path.join(REPO, "scripts/install-deps"), "--list"], capture_output=True,
                       text=True, timeout=30, env={"PATH": str(bindir)})
    assert p.returncode == 0, p.stderr
    pkgs = p.stdout.split()
    assert "nodejs" in pkgs and "elixir" in pkgs and "man-db" in pkgs, pkgs
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    table = readme[readme.index("## Requirements"):]
    table = table[:table.index("\n## ", 1)]
    missing = [pkg for pkg in pkgs if "`%s`" % pkg not in table]
    assert not missing, "README's Requirements do not name %r" % missing
