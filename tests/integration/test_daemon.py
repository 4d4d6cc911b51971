"""The daemon process: command line, config file, signals, socket, peers (docs/sandboxd.8 and docs/sandboxd.conf.5)."""

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

import sbx
from conftest import SANDBOXD_BIN, merge_config, render_config, read_proc_stat
from launch import accepts

SCALE = sbx.SCALE


def run_bin(*args, timeout=10):
    return subprocess.run([SANDBOXD_BIN] + list(args), capture_output=True, text=True,
                          timeout=timeout * SCALE, stdin=subprocess.DEVNULL)


def test_version_and_help():
    p = run_bin("--version")
    assert p.returncode == 0, p
    assert (p.stdout + p.stderr).strip()
    p = run_bin("--help")
    assert p.returncode == 0, p
    assert "-c" in p.stdout + p.stderr and "-s" in p.stdout + p.stderr


def test_bad_option_is_usage_error():
    p = run_bin("--no-such-option")
    assert p.returncode != 0


def test_extra_argument_is_named():
    """A stray argument (a socket path without -s, say) is named before the
    usage, not left for the reader to find."""
    p = run_bin("-c", "/dev/null", "/tmp/x.sock")
    assert p.returncode == 2, p
    assert p.stderr.startswith("sandboxd: unexpected argument '/tmp/x.sock'"), p.stderr
    assert "usage: sandboxd" in p.stderr, p.stderr


def test_check_config_good(tmp_path):
    conf = tmp_path / "good.conf"
    conf.write_text(render_config(merge_config()))
    p = run_bin("--check-config", "-c", str(conf))
    assert p.returncode == 0, p


@pytest.mark.parametrize("text,line", [
    ("[daemon]\nmax_workers = 4\nno_such_key = 1\n", 3),
    ("[daemon]\n# comment\n\nmax_workers = many\n", 4),
    ("[nosuchsection]\nx = 1\n", None),
    ("[defaults]\ntimeout_ms = 100\npriority = extreme\n", 3),
    ("[ceilings]\n\nmax_heap = -5\n", 3),
])
def test_check_config_bad(tmp_path, text, line):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    p = run_bin("--check-config", "-c", str(conf))
    assert p.returncode != 0, p
    err = p.stderr + p.stdout
    assert "bad.conf" in err, err
    if line is not None:
        assert ":%d" % line in err or "line %d" % line in err, err


def test_bad_config_refuses_to_start(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[daemon]\nbogus = 1\n")
    sock = tempfile.mktemp(prefix="sbxbad-", dir="/tmp")
    p = run_bin("-c", str(conf), "-s", sock)
    assert p.returncode != 0
    assert "bad.conf" in p.stderr
    assert not os.path.exists(sock)


def test_size_suffixes_and_infinity_accepted(daemon_factory):
    d = daemon_factory(defaults={"max_heap": "64M", "max_reductions": "infinity"},
                       ceilings={"max_heap": "1G", "max_reductions": "infinity"})
    with d.client() as c:
        assert c.value("return 1", limits={"max_reductions": "infinity"}) == 1


def test_builtin_defaults_without_config():
    tmp = tempfile.mkdtemp(prefix="sbxnc-", dir="/tmp")
    sock = os.path.join(tmp, "s.sock")
    err = open(os.path.join(tmp, "err"), "wb")
    proc = subprocess.Popen([SANDBOXD_BIN, "-s", sock], stdout=err, stderr=err,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + sbx.SAFETY_NET
        while not accepts(sock):
            assert proc.poll() is None, open(os.path.join(tmp, "err")).read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with sbx.Client(sock) as c:
            c.ping()
            assert c.value("return 'defaults'") == "defaults"
            desc = c.call("describe").result
            flat = repr(desc)
            assert "60000" in flat, "default timeout_ms 60000 not in describe: %r" % desc
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15 * SCALE)
        err.close()
    assert rc == 0
    assert not os.path.exists(sock)
    shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ signals

def test_sigterm_with_running_executions(daemon_factory):
    d = daemon_factory(check_stop=False)
    c = d.client()
    ids = [c.send_execute("print('x') T.ready() while true do end",
                          tools=[{"name": "T", "functions": ["ready"]}],
                          handlers={"T.ready": lambda a: True}, timeout_ms=60000 * SCALE)
           for _ in range(2)]
    c.wait_tool_call(2)
    time.sleep(0.1)
    workers = d.worker_pids()
    zygotes = [z[0] for z in d.zygotes()]
    assert len(workers) == 2
    d.signal(signal.SIGTERM)
    # the executions end (an error response or the connection closing)
    try:
        for i in ids:
            r = c.wait(i, timeout=15 * SCALE)
            assert not r.ok, r
    except sbx.ConnectionClosed:
        pass
    rc = d.proc.wait(15 * SCALE)
    assert rc == 0, d.stderr
    assert not os.path.exists(d.socket_path)
    # no worker or zygote survives the daemon
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        alive = [p for p in workers + zygotes if (read_proc_stat(p) or ("", "Z"))[1] != "Z"]
        if not alive:
            break
        assert time.monotonic() < deadline, "processes survived the daemon: %r" % alive
        time.sleep(0.05)
    d.check_sanitizers()


def test_sigint_exits_cleanly(daemon_factory):
    d = daemon_factory(check_stop=False)
    with d.client() as c:
        c.ping()
    d.signal(signal.SIGINT)
    assert d.proc.wait(15 * SCALE) == 0
    assert not os.path.exists(d.socket_path)


def test_sighup_reload_keeps_connections(daemon_factory):
    d = daemon_factory(defaults={"max_output_bytes": 1000000})
    c = d.client()
    r = c.exec_ok("print(string.rep('a', 100))")
    assert r["output_truncated"] is False
    cfg = merge_config(defaults={"max_output_bytes": 10})
    d.write_config(cfg)
    d.signal(signal.SIGHUP)
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        r = c.exec_ok("print(string.rep('a', 100))")     # same connection
        if r["output_truncated"]:
            break
        assert time.monotonic() < deadline, "SIGHUP did not reload max_output_bytes"
        time.sleep(0.05)
    assert len(r["output"]) <= 10
    assert d.alive()
    c.ping()


def test_sighup_bad_config_keeps_old(daemon_factory):
    d = daemon_factory()
    c = d.client()
    d.write_config(text="[daemon]\nthis is not valid\n")
    d.signal(signal.SIGHUP)
    time.sleep(0.3)
    assert d.alive(), d.stderr
    c.ping()
    assert c.value("return 5") == 5
    d.write_config(merge_config())     # leave a good file for teardown


def test_config_values_the_daemon_cannot_serve(daemon_factory):
    """max_parallel_calls = 4294967295 passed --check-config, and then every
    execute, even `return 1`, was internal_error "out of memory".  Every
    number now has the range the daemon can serve: --check-config, a start
    and a SIGHUP reload all refuse a value outside it with a message naming
    the file, the line, the key and the range (a reload keeps the running
    configuration); the bound itself is served, executions and parallel()
    tool calls included."""
    bad = render_config(merge_config(daemon={"max_parallel_calls": 4294967295}))
    line = bad.splitlines().index("max_parallel_calls = 4294967295") + 1
    want = (r"sandboxd\.conf:%d: bad value for max_parallel_calls: '4294967295' \(out of "
            r"range: from 1 to 1024\)" % line)
    d = daemon_factory(daemon={"max_parallel_calls": 1024})
    p = subprocess.run([SANDBOXD_BIN, "-c", d.config_path, "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    d.write_config(text=bad)
    p = subprocess.run([SANDBOXD_BIN, "-c", d.config_path, "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and re.search(want, p.stdout + p.stderr), p
    p = subprocess.run([SANDBOXD_BIN, "-c", d.config_path, "-s", d.socket_path + ".2"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and re.search(want, p.stdout + p.stderr), p
    c = d.client()
    d.signal(signal.SIGHUP)
    d.wait_log(want)
    d.wait_log(r"SIGHUP: .* has errors; keeping the running configuration")
    assert c.call("describe").result["daemon"]["max_parallel_calls"] == 1024
    code = ("local f = {} for i = 1, 40 do f[i] = function() return T.f(i) end end "
            "local r = {parallel(table.unpack(f))} return #r, r[40]")
    assert c.value(code, tools=[{"name": "T", "functions": ["f"]}],
                   handlers={"T.f": lambda a: a[0] * 2}) == [40, 80]
    assert c.value("return 1") == 1
    # the bound itself, reloaded
    d.write_config(merge_config(daemon={"max_parallel_calls": 1}))
    d.signal(signal.SIGHUP)
    d.wait_log(r"SIGHUP: configuration reloaded")
    assert c.call("describe").result["daemon"]["max_parallel_calls"] == 1
    assert c.value("return 1") == 1
    d.write_config(merge_config())


# ------------------------------------------------------------------ socket

def test_socket_mode(daemon_factory):
    d = daemon_factory(daemon={"socket_mode": "0600"})
    mode = stat.S_IMODE(os.stat(d.socket_path).st_mode)
    assert mode == 0o600, oct(mode)
    d2 = daemon_factory(daemon={"socket_mode": "0666"})
    assert stat.S_IMODE(os.stat(d2.socket_path).st_mode) == 0o666


def test_stale_socket_file_replaced(daemon_factory):
    d = daemon_factory(start=False)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(d.socket_path)      # a stale socket nobody listens on
    s.close()
    d.start()
    with d.client() as c:
        c.ping()


def test_systemd_socket_activation():
    tmp = tempfile.mkdtemp(prefix="sbxsa-", dir="/tmp")
    path = os.path.join(tmp, "act.sock")
    conf = os.path.join(tmp, "c.conf")
    with open(conf, "w") as f:
        f.write(render_config(merge_config()))
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    fd = lsock.fileno()

    def to_fd3():
        os.dup2(fd, 3)     # dup2 clears FD_CLOEXEC on fd 3

    errp = os.path.join(tmp, "err")
    err = open(errp, "wb")
    env = {"LISTEN_FDS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" -c "$1"',
                             SANDBOXD_BIN, conf],
                            env=env, stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                            preexec_fn=to_fd3, close_fds=False, start_new_session=True)
    try:
        time.sleep(0.2)
        with sbx.Client(path) as c:
            c.ping()
            assert c.value("return 'activated'") == "activated"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15 * SCALE)
        err.close()
        lsock.close()
    assert rc == 0, open(errp).read()
    shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ peers

def test_forbidden_peer(daemon_factory):
    d = daemon_factory(daemon={"allow_uids": "54321", "allow_gids": "54321"})
    c = d.client()
    # The daemon answers a refused peer at once, unprompted, and closes: a
    # request sent now may meet a closed socket, so read first.
    try:
        r = c.next_response()
        assert r.code == -32010 and r.kind == "forbidden", r
    except sbx.ConnectionClosed:
        pytest.fail("connection closed without a forbidden error")
    # nothing else is served on that connection
    try:
        i = c.send_execute("return 1")
        r = c.wait(i, timeout=3 * SCALE)
        assert r.code == -32010, r
    except (sbx.ConnectionClosed, BrokenPipeError, ConnectionResetError):
        pass
    assert d.alive()


def test_allowed_peer(daemon_factory):
    d = daemon_factory(daemon={"allow_uids": "54321 %d" % os.getuid()})
    with d.client() as c:
        c.ping()
        assert c.value("return 1") == 1
    d2 = daemon_factory(daemon={"allow_gids": str(os.getgid())})
    with d2.client() as c:
        c.ping()


# ------------------------------------------------------------------ robustness

def test_abrupt_clients(daemon):
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(daemon.socket_path)
        s.send(b'{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"return 1"}}\n{"jsonrpc":')
        s.close()
    daemon.assert_alive()
    daemon.assert_no_leftovers()


def test_client_not_reading_does_not_block_others(daemon):
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(daemon.socket_path)
    slow.setblocking(False)
    line = b'{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"return string.rep(\'x\', 200000)"}}\n'
    sent = 0
    try:
        for _ in range(100):
            try:
                slow.send(line)
                sent += 1
            except BlockingIOError:
                break
        with daemon.client() as c:
            c.ping()
            assert c.value("return 'unblocked'") == "unblocked"
    finally:
        slow.close()
    daemon.assert_alive()
    daemon.assert_no_leftovers()


def test_max_connections(daemon_factory):
    """One connection over max_connections gets one `busy` error (id null)
    and EOF; the open ones are untouched, and a slot freed is usable again."""
    d = daemon_factory(daemon={"max_connections": 2})
    a = d.client()
    deadline = time.monotonic() + sbx.SAFETY_NET
    while a.call("describe", {}).result["state"]["connections"] != 1:
        assert time.monotonic() < deadline, "the fixture's own connections never closed"
        time.sleep(0.02)
    b = d.client()
    b.ping()
    c = d.client()
    r = c.next_response()
    assert r.code == -32009 and r.kind == "busy", r
    assert r.data["max_connections"] == 2, r
    with pytest.raises(sbx.ConnectionClosed):
        c.next_response(timeout=3 * SCALE)
    d.wait_log(r"refused a connection: 2 connections are open")
    a.ping()
    assert a.call("describe", {}).result["state"]["connections"] == 2
    b.close()
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:                 # the daemon notices b's close on its next turn
        e = d.client()
        try:
            e.ping()
            break
        except (sbx.ConnectionClosed, AssertionError):
            e.close()
            assert time.monotonic() < deadline, "a freed connection slot was not reusable"
            time.sleep(0.05)
    assert e.value("return 1") == 1
    a.close()
    e.close()
    c.close()


def _read_to_eof(s, timeout):
    s.settimeout(timeout)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_busy_refusal_is_read_not_reset(daemon_factory):
    """A connection over max_connections that sends its request after the
    daemon refused it still reads the `busy` line and then EOF: the daemon
    drops its input for a while instead of closing on it (a reset)."""
    d = daemon_factory(daemon={"max_connections": 2})
    a = d.client()
    deadline = time.monotonic() + sbx.SAFETY_NET
    while a.call("describe", {}).result["state"]["connections"] != 1:
        assert time.monotonic() < deadline, "the fixture's own connections never closed"
        time.sleep(0.02)
    b = d.client()
    b.ping()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(d.socket_path)
    d.wait_log(r"refused a connection: 2 connections are open")
    time.sleep(0.1)
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"return 1",'
              b'"pad":"%s"}}\n' % (b"x" * 200000))
    lines = _read_to_eof(s, 5 * SCALE).split(b"\n")
    s.close()
    assert len(lines) == 2 and lines[1] == b"", lines
    r = sbx.parse_line(lines[0])[0]
    assert r["error"]["data"]["kind"] == "busy", r
    a.ping()
    b.ping()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid")
def test_refused_peers_do_not_take_slots(daemon_factory):
    """A refused uid that connects again and again, reading nothing and
    closing nothing, holds no slot of max_connections: allowed clients are
    served meanwhile, and the refused connections still read `forbidden`."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    d = daemon_factory(daemon={"allow_uids": "0", "socket_mode": "0666", "max_connections": 4})
    os.chmod(d.tmpdir, 0o755)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            socks = []
            for _ in range(40):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(d.socket_path)
                socks.append(s)
            line = socks[-1].makefile("rb").readline()
            os.write(wfd, b"1" if b'"forbidden"' in line else b"0")
            time.sleep(30)
        finally:
            os._exit(0)
    os.close(wfd)
    try:
        assert os.read(rfd, 1) == b"1", "the last refused connection did not read forbidden"
        clients = [d.client() for _ in range(3)]
        for c in clients:
            c.ping()
            assert c.value("return 1") == 1
        for c in clients:
            c.close()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(rfd)


# ------------------------------------------------------------------ answer backlog

# print() of 64 KiB of control bytes: each is written \u0001 in the answer (6x)
PRINT_CONTROL = "local s = string.rep('\\1', 65535) for i = 1, %d do print(s) end return 1"


def _raw_execute(path, code, limits, id=1, timeout_ms=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    params = {"code": code, "limits": limits}
    if timeout_ms is not None:
        params["timeout_ms"] = timeout_ms
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": id, "method": "execute",
                          "params": params}).encode() + b"\n")
    return s


# The ceiling's timeout: for a chunk whose CPU a loaded machine stretches,
# the execution's wall clock is only a safety net.
LONG_MS = 120000 * SCALE


def _read_line(s, timeout):
    s.settimeout(timeout)
    parts = []
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise sbx.ConnectionClosed("EOF after %d bytes" % sum(map(len, parts)))
        parts.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(parts)


def test_large_answer_reaches_a_reading_client(daemon_factory):
    """An answer within the limits but above any fixed backlog (70 MB of
    bindings; 16 MiB of control bytes printed, escaped six-fold, is another)
    reaches a client that reads, instead of closing its connection."""
    d = daemon_factory()
    s = _raw_execute(d.socket_path, "big = string.rep('x', 70000000) return 1",
                     {"max_heap": 300000000, "max_bindings_bytes": 80000000}, timeout_ms=LONG_MS)
    line = _read_line(s, LONG_MS / 1000)
    s.close()
    assert len(line) > 70000000, len(line)
    r = json.loads(line)
    assert r["result"]["binding_names"] == ["big"], r["result"]["stats"]
    assert "does not read" not in d.stderr


def test_largest_output_reaches_a_reading_client(daemon_factory):
    """16 MiB of control bytes printed (max_output_bytes at its ceiling) is a
    96 MiB answer, every byte written \\u0001: a client that reads gets all
    of it, and quickly (the supervisor escapes it in one pass)."""
    d = daemon_factory()
    s = _raw_execute(d.socket_path, PRINT_CONTROL % 257, {"max_output_bytes": 16 << 20},
                     timeout_ms=LONG_MS)
    line = _read_line(s, LONG_MS / 1000)
    s.close()
    assert len(line) > 95 << 20, len(line)
    r = json.loads(line)
    assert r["result"]["output_truncated"] is True, r["result"]["stats"]
    assert r["result"]["output"] == ("\x01" * 65535 + "\n") * 256
    assert "does not read" not in d.stderr


SMALL_ANSWERS = dict(daemon={"max_message_bytes": 1 << 20},
                     defaults={"max_bindings_bytes": 1000000},
                     ceilings={"max_output_bytes": 4 << 20, "max_bindings_bytes": 1000000})


def test_client_that_stops_reading_is_disconnected(daemon_factory):
    """Answers past the per-connection bound (64 MiB here) wait for a peer
    that takes nothing for 5 s; then it is disconnected, and only it."""
    d = daemon_factory(**SMALL_ANSWERS)
    s = _raw_execute(d.socket_path, PRINT_CONTROL % 64, {"max_output_bytes": 4 << 20})
    for i in (2, 3):             # three answers of 24 MiB, never read
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, "method": "execute",
                              "params": {"code": PRINT_CONTROL % 64,
                                         "limits": {"max_output_bytes": 4 << 20}}}).encode()
                  + b"\n")
    d.wait_log(r"peer does not read its answers \(\d+ bytes wait, none taken for \d+ s\)",
               timeout=15 * SCALE)
    with d.client() as c:
        assert c.value("return 'still serving'") == "still serving"
    s.close()


def test_write_idle_timeout(daemon_factory):
    """A peer that takes no byte for write_idle_timeout_ms while answers
    wait is disconnected with one log line, however little waits (here
    three answers of 3 MiB, far below the 64 MiB bound of a stalled peer).
    Its neighbours: a peer that reads slowly (128 KiB every 0.2 s, ten
    times within the timeout, and about 5 s for its answer, more than
    twice the timeout) keeps its connection, and so does a peer with
    nothing waiting that sends nothing all that time."""
    d = daemon_factory(daemon={"write_idle_timeout_ms": 2000}, **{
        k: v for k, v in SMALL_ANSWERS.items() if k != "daemon"})
    idle = d.client()
    idle.ping()
    code = PRINT_CONTROL % 8                # 8 x 64 KiB of \u0001: 3 MiB
    s = _raw_execute(d.socket_path, code, {"max_output_bytes": 1 << 20})
    for i in (2, 3):
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, "method": "execute", "params": {
            "code": code, "limits": {"max_output_bytes": 1 << 20}}}).encode() + b"\n")
    slow = _raw_execute(d.socket_path, code, {"max_output_bytes": 1 << 20}, id="slow")
    got, t0 = b"", time.monotonic()
    slow.settimeout(10 * SCALE)
    while not got.endswith(b"\n"):
        time.sleep(0.2)
        chunk = slow.recv(128 << 10)
        assert chunk, "the slow reader was disconnected after %d bytes" % len(got)
        got += chunk
    assert time.monotonic() - t0 > 4.0
    assert json.loads(got)["id"] == "slow"
    d.wait_log(r"conn=\d+: peer took no byte for \d+\.\d s while \d+ bytes of answers wait "
               r"\(write_idle_timeout_ms 2000\); disconnecting")
    s.settimeout(10 * SCALE)
    with pytest.raises((sbx.ConnectionClosed, ConnectionResetError)):
        while True:
            if not s.recv(1 << 20):
                raise sbx.ConnectionClosed("EOF")
    s.close()
    assert d.stderr.count("peer took no byte") == 1, d.stderr[-2000:]
    idle.ping()                         # nothing waited for it: still connected
    slow.close()


def _wait_state(pid, states, timeout=60 * SCALE):
    """Wait until pid's /proc state is one of states (a safety net of a
    minute: a signal is acted on as soon as the process is scheduled)."""
    deadline = time.monotonic() + timeout
    while True:
        st = read_proc_stat(pid)
        if st and st[1] in states:
            return
        assert time.monotonic() < deadline, "pid %d never reached state %s: %r" % (
            pid, states, st)
        time.sleep(0.01)


def test_a_peer_that_reads_while_the_daemon_is_stopped_keeps_its_answer(daemon_factory):
    """A peer's write clock runs on the peer's progress, never on the
    daemon's own absence: the daemon is stopped (SIGSTOP) with an answer
    four times the socket's size half written, its peer takes every byte
    the socket holds, and the daemon stays stopped for more than twice
    write_idle_timeout_ms.  When it runs again, the timer that fell due
    meanwhile (libev runs it before the write watcher of the same
    iteration) first writes what the socket takes, sees the peer's progress
    and keeps the connection; the whole answer arrives.  Judged on the
    last write before the stop, or on the iteration's start time, the peer
    would look idle for the whole stop and be disconnected."""
    d = daemon_factory(daemon={"write_idle_timeout_ms": 2000})
    s = _raw_execute(d.socket_path, PRINT_CONTROL % 4, {})   # 256 KiB of \u0001: 1.5 MiB
    s.settimeout(60 * SCALE)                # a safety net: the answer's first bytes
    first = s.recv(1, socket.MSG_PEEK)
    assert first == b"{", first
    d.signal(signal.SIGSTOP)
    try:
        _wait_state(d.pid, "T")
        got = b""
        s.setblocking(False)
        while True:                         # what the socket holds; no more comes
            try:
                chunk = s.recv(1 << 20)
            except BlockingIOError:
                break
            assert chunk, "EOF while the daemon is stopped"
            got += chunk
        assert 0 < len(got) < 1 << 20, len(got)
        time.sleep(2.5 * 2.0)               # the stop: 2.5 x write_idle_timeout_ms
    finally:
        d.signal(signal.SIGCONT)
    s.setblocking(True)
    got += _read_line(s, 60 * SCALE)        # a safety net: the rest of the answer
    s.close()
    r = json.loads(got)
    assert r["id"] == 1 and r["result"]["output"] == ("\x01" * 65535 + "\n") * 4, \
        (len(got), r.get("error"))
    assert "peer took no byte" not in d.stderr, d.stderr[-2000:]


def test_max_backlog_bytes_bounds_all_connections(daemon_factory):
    """Three peers that do not read, 18, 24 and 18 MiB of answers, against a
    total of 56 MiB (the least these ceilings allow: one answer's output
    twice, streamed and answered): the connection holding the most is closed
    at once (its queue freed); the others still get their whole answers."""
    cfg = dict(SMALL_ANSWERS)
    cfg["daemon"] = dict(SMALL_ANSWERS["daemon"], max_backlog_bytes=56 << 20)
    d = daemon_factory(**cfg)
    a = _raw_execute(d.socket_path, PRINT_CONTROL % 48, {"max_output_bytes": 4 << 20})
    d.wait_log(r"outcome=ok")
    b = _raw_execute(d.socket_path, PRINT_CONTROL % 64, {"max_output_bytes": 4 << 20})
    d.wait_log(r"(?s)outcome=ok.*outcome=ok")
    c = _raw_execute(d.socket_path, PRINT_CONTROL % 48, {"max_output_bytes": 4 << 20})
    d.wait_log(r"above max_backlog_bytes 58720256; closing the connection with the most")
    with pytest.raises(sbx.ConnectionClosed):
        _read_line(b, 10 * SCALE)
    for s in (a, c):
        r = json.loads(_read_line(s, 30 * SCALE))
        assert len(r["result"]["output"]) == 3 << 20
        s.close()
    b.close()


# ------------------------------------------------------------------ supervisor memory

def _status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def _peak_growth(d, send):
    """(growth of the supervisor's peak RSS, its RSS growth after) in bytes
    while send() runs; the peak is reset first (write to clear_refs)."""
    rss0 = _status_kib(d.pid, "VmRSS")
    with open("/proc/%d/clear_refs" % d.pid, "w") as f:
        f.write("5")                    # VmHWM := VmRSS
    send()
    return ((_status_kib(d.pid, "VmHWM") - rss0) << 10,
            (_status_kib(d.pid, "VmRSS") - rss0) << 10)


DENSE = 16 << 20


DENSE_HEAD = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":'


def _refused_peak(daemon_factory, line):
    """(the supervisor's peak growth, its growth after) while it takes in
    `line` and answers it message_too_large; it goes on serving after."""
    d = daemon_factory(daemon={"max_message_bytes": DENSE})
    c = d.client(timeout=60 * SCALE)
    c.ping()
    state = {}

    def send():
        c.send_raw(line)
        state["r"] = c.next_response()
        c.ping()                        # the daemon is done with the line
    peak, after = _peak_growth(d, send)
    print("%r...: %d bytes, peak growth %.1fx, after %.1fx"
          % (line[len(DENSE_HEAD):len(DENSE_HEAD) + 16], len(line), peak / len(line),
             after / len(line)))
    assert state["r"].kind == "message_too_large", state["r"]
    c.ping()
    return peak, after


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
def test_dense_message_is_refused_within_its_memory_budget(daemon_factory):
    """A 16 MiB line of `[[],[],...]` would take the supervisor about 45
    times its size as a jansson tree, past its budget (4x the size + 16 MiB):
    its containers alone show that, so nothing is built and the peak stays
    under 4x; memory goes back after, and the client is told
    message_too_large."""
    head = DENSE_HEAD + b"["
    line = head + b",".join([b"[]"] * ((DENSE - len(head) - 10) // 3)) + b"]}}\n"
    peak, after = _refused_peak(daemon_factory, line)
    assert peak <= 4 * len(line), peak / len(line)
    assert after <= 2 * len(line), after / len(line)


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
@pytest.mark.parametrize("elem", [b"1", b'""'])
def test_dense_scalars_are_refused_before_they_are_built(daemon_factory, elem):
    """A 16 MiB line of `[1,1,...]` or `["","",...]`: one container, but each
    number costs jansson at least 24 bytes and each string value 33, past
    the budget (4x the size + 16 MiB) as a count of them shows, so nothing
    is built and the peak stays under 4x."""
    head = DENSE_HEAD + b"["
    line = head + b",".join([elem] * ((DENSE - len(head) - 10) // (len(elem) + 1))) + b"]}}\n"
    peak, after = _refused_peak(daemon_factory, line)
    assert peak <= 4 * len(line), peak / len(line)
    assert after <= 2 * len(line), after / len(line)


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
def test_dense_members_are_refused_within_the_tree_budget(daemon_factory):
    """A 16 MiB line of one object with a million distinct keys: a key costs
    nothing certain (a repeated one reuses its entry), so the early count
    lets it through, but each member takes about 10 times its text as a
    tree; the parse stops at its budget (4x the size + 16 MiB), the peak
    stays under 8x and the client is told message_too_large."""
    head = DENSE_HEAD + b"{"
    n = (DENSE - len(head) - 10) // 16      # `"k0000000001":1,`
    line = head + b",".join(b'"k%010d":1' % i for i in range(n)) + b"}}}\n"
    peak, after = _refused_peak(daemon_factory, line)
    assert peak <= 8 * len(line), peak / len(line)
    assert after <= 2 * len(line), after / len(line)


def test_brackets_inside_strings_are_not_containers(daemon_factory):
    """The count of containers skips strings: a 16 MiB line whose params hold
    one string of `[[[[...` (and an escaped quote inside it) is answered."""
    d = daemon_factory(daemon={"max_message_bytes": DENSE})
    c = d.client(timeout=60 * SCALE)
    head = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\\"'
    line = head + b"[{" * ((DENSE - len(head) - 10) // 2) + b'"}}\n'
    c.send_raw(line)
    r = c.next_response()
    assert r.ok, r
    c.ping()


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
def test_dense_result_passes_through_within_its_memory_budget(daemon_factory):
    """A chunk's value of 3 million references to one table is encoded as
    3 million `[]` (a 45-fold jansson tree): the supervisor validates it
    and passes the bytes on without building it, so its peak stays under 8x
    the frame and the client gets the whole value."""
    d = daemon_factory(daemon={"max_message_bytes": DENSE})
    c = d.client(timeout=120 * SCALE)
    c.ping()
    state = {}

    def send():
        state["r"] = c.execute("local t, r = {}, {} for i = 1, 3000000 do r[i] = t end return r",
                               limits={"max_heap": 500000000}, timeout_ms=100000,
                               timeout=120 * SCALE)
        c.ping()
    peak, after = _peak_growth(d, send)
    r = state["r"]
    print("dense result: peak growth %.1fx, after %.1fx of 9 MB" % (peak / 9e6, after / 9e6))
    assert r.ok, r
    assert len(r.result["value"]) == 3000000 and r.result["value"][-1] == []
    assert peak <= 8 * 9e6, peak / 9e6
    assert after <= 2 * 9e6, after / 9e6


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
def test_dense_tool_args_pass_through_within_their_memory_budget(daemon_factory):
    """A tool call whose argument holds 3 million references to one table
    (3 million `[]`, 9 MB) reaches the client whole, the supervisor's peak
    under 8x: the args pass through as bytes, counted for the arity check."""
    d = daemon_factory(daemon={"max_message_bytes": DENSE})
    c = d.client(timeout=120 * SCALE)
    c.ping()
    state = {}
    tools = [{"name": "Echo", "functions": [{"name": "take", "arities": [1]}]}]

    def send():
        state["r"] = c.execute("local t, r = {}, {} for i = 1, 3000000 do r[i] = t end "
                               "return Echo.take(r)", tools=tools,
                               handlers={"Echo.take": lambda a: len(a[0])},
                               limits={"max_heap": 500000000}, timeout_ms=100000,
                               timeout=120 * SCALE)
        c.ping()
    peak, after = _peak_growth(d, send)
    r = state["r"]
    print("dense args: peak growth %.1fx, after %.1fx of 9 MB" % (peak / 9e6, after / 9e6))
    assert r.ok and r.result["value"] == 3000000, r
    assert peak <= 8 * 9e6, peak / 9e6


def test_largest_message_reaches_a_worker(daemon_factory):
    """max_message_bytes may be at most 63 MiB: a worker reads at most 64
    MiB a job frame, so a message at the bound, its bindings nearly all of
    it, is a job a worker takes and runs (a larger max_message_bytes is
    refused by the configuration check: test_config.c)."""
    # The wall limit is a safety net here (1.3 s of CPU; a loaded machine
    # has taken more than 10 s of wall time for it): what is checked is
    # that the job is taken and run, not how fast.
    d = daemon_factory(daemon={"max_message_bytes": 63 << 20},
                       defaults={"max_heap": 400000000, "timeout_ms": 120000 * SCALE})
    c = d.client(timeout=150 * SCALE)
    head = (b'{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"local n = #big '
            b'big = nil return n",')
    tail = b'"]]}}'
    body = b'"bindings":[["big","'
    big = b"x" * ((63 << 20) - len(head) - len(body) - len(tail))
    c.send_raw(head + body + big + tail + b"\n")
    r = c.next_response()
    assert r.ok and r.result["value"] == len(big), r
    c.ping()


@pytest.mark.skipif(os.environ.get("SANDBOXD_SANITIZE") == "1",
                    reason="measures glibc's heap; ASan's allocator keeps freed memory")
def test_memory_goes_back_after_a_large_message(daemon_factory):
    """A large message within the budget (16 MiB of small numbers) is
    parsed and answered; afterwards the supervisor's RSS is back near where
    it was (the heap is trimmed, not kept in free lists)."""
    d = daemon_factory(daemon={"max_message_bytes": DENSE})
    c = d.client(timeout=60 * SCALE)
    c.ping()
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":['
    n = (DENSE - len(head) - 10) // 11
    line = head + b",".join([b"1234567890"] * n) + b"]}}\n"
    state = {}

    def send():
        c.send_raw(line)
        state["r"] = c.next_response()
        c.ping()                        # the daemon is done with the line
    peak, after = _peak_growth(d, send)
    assert state["r"].ok, state["r"]
    print("numbers: peak growth %.1fx, after %.1fx" % (peak / len(line), after / len(line)))
    assert after <= 2 * len(line), after / len(line)


def _input_bytes(c):
    return c.call("describe", {}).result["state"]["input_buffer_bytes"]


def _wait_input_bytes(c, pred, what):
    deadline = time.monotonic() + sbx.SAFETY_NET
    while True:
        n = _input_bytes(c)
        if pred(n):
            return n
        assert time.monotonic() < deadline, "%s: input_buffer_bytes stayed %d" % (what, n)
        time.sleep(0.02)


def test_large_message_buffer_is_released(daemon_factory):
    """A connection's input buffer grows for a large message and is given back
    once the message is handled, so a long-lived connection that once sent a
    big request does not pin that memory (describe: state.input_buffer_bytes)."""
    d = daemon_factory(daemon={"max_message_bytes": 4 << 20})
    watcher = d.client()
    big = d.client()
    pad = "x" * (3 << 20)
    r = big.call("ping", {"pad": pad})
    assert r.ok, r
    # what stays is at most a small reusable buffer per connection
    _wait_input_bytes(watcher, lambda n: n <= 2 * 64 * 1024, "after a 3 MiB message")
    big.ping()
    watcher.close()
    big.close()


def test_input_budget_closes_the_largest_holder(daemon_factory):
    """Over max_input_bytes, the connection holding the largest unfinished
    message gets one `busy` error (data.max_input_bytes) and EOF; the others,
    and new ones, are untouched."""
    d = daemon_factory(daemon={"max_message_bytes": 1 << 20, "max_input_bytes": 1536 * 1024})
    watcher = d.client()
    base = _input_bytes(watcher)
    head = '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"'
    a, b, c = d.client(), d.client(), d.client()
    a.send_raw((head + "a" * 700000).encode())          # buffer grows to 1 MiB
    _wait_input_bytes(watcher, lambda n: n >= base + (1 << 20), "a's 700 kB")
    b.send_raw((head + "b" * 100000).encode())          # 128 KiB
    _wait_input_bytes(watcher, lambda n: n >= base + (1 << 20) + (128 << 10), "b's 100 kB")
    c.send_raw((head + "c" * 300000).encode())          # 512 KiB: over the budget
    r = a.next_response(timeout=5 * SCALE)
    assert r.code == -32009 and r.kind == "busy", r
    assert r.data["max_input_bytes"] == 1536 * 1024, r
    assert r.id == 7, r                 # read from the unfinished message
    assert a.wait_eof(timeout=5 * SCALE)
    d.wait_log(r"above max_input_bytes 1572864; closing the connection with the largest")
    assert _input_bytes(watcher) <= 1536 * 1024
    # b and c finish their messages and are answered
    for cl in (b, c):
        cl.send_raw(b'"}}\n')
        r = cl.wait(7)
        assert r.ok, r
        cl.ping()
    e = d.client()
    e.ping()
    for cl in (watcher, b, c, e):
        cl.close()
