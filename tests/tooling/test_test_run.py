"""scripts/test-run, make test's runner: every stage runs even after one
failed, each stage's counts come from its runners' own summary lines, the
table closes the run and the exit status says whether any stage failed;
stages on different builds run in two lanes, never two on one build; a
signal to the run ends every stage's processes, the daemons its suites
started included."""
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from procs import alive, gone

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_RUN = os.path.join(REPO, "scripts", "test-run")


def env_jobs(jobs):
    env = {k: v for k, v in os.environ.items() if k != "TEST_JOBS"}
    if jobs is not None:
        env["TEST_JOBS"] = str(jobs)
    return env


def run(*stages, summary=None, jobs=None, logs=None):
    argv = [TEST_RUN] + (["--summary", str(summary)] if summary else []) + \
        (["--logs", str(logs)] if logs else []) + list(stages)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env_jobs(jobs))


def rows(out):
    """{(stage, build): [passed, failed, skipped, seconds, result]} of the table."""
    table = out[out.index("==== make test: summary"):].splitlines()[3:]
    got = {}
    for line in table:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == "total":
            got["total"] = cells[1:]
        elif cells[0] != "make test: FAILED: " and len(cells) >= 7:
            got[(cells[0], cells[1])] = cells[2:]
    return got


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_stage_runs_after_a_failure_and_the_run_fails_at_the_end(tmp_path, jobs):
    p = run("first|build|echo one; exit 3", "second|build/asan|echo two",
            summary=tmp_path / "s.txt", jobs=jobs)
    assert p.returncode == 1, p.stdout
    assert "one\n" in p.stdout and "two\n" in p.stdout
    t = rows(p.stdout)
    assert t[("first", "build")][4] == "FAILED (exit 3)"
    assert t[("second", "build/asan")][4] == "ok"
    assert t["total"][-1] == "1 of 2 stages failed"
    assert "make test: FAILED: first (build)" in p.stdout
    assert (tmp_path / "s.txt").read_text().startswith("stage")


def test_all_stages_passing_exit_zero():
    p = run("a|-|true", "b|-|true")
    assert p.returncode == 0, p.stdout
    assert rows(p.stdout)["total"][-1] == "ok"


# One line as each runner prints it (colour codes as under a terminal), and
# the counts it must give.
RUNNER_LINES = [
    ("pytest -q", "\x1b[32m12 passed\x1b[0m, \x1b[33m2 skipped\x1b[0m in 3.21s", (12, 0, 2)),
    ("pytest failed", "==== 1 failed, 3 passed, 1 error, 4 warnings in 9.01s ====", (3, 2, 0)),
    ("node TAP", "# pass 7\n# fail 1\n# cancelled 1\n# skipped 2\n# todo 0", (7, 2, 2)),
    ("node spec", "\u2139 pass 5\n\u2139 fail 0\n\u2139 skipped 1", (5, 0, 1)),
    ("ExUnit", "1 doctest, 20 tests, 2 failures, 3 excluded", (16, 2, 3)),
    ("ExUnit skipped", "10 tests, 0 failures, 1 skipped", (9, 0, 1)),
    ("cmocka", "[==========] 5 test(s) run.\n[  PASSED  ] 4 test(s).\n"
               "[  FAILED  ] 1 test(s), listed below:\n[  FAILED  ] test_x", (4, 1, 0)),
]


def test_each_runners_summary_line_is_counted(tmp_path):
    stages = []
    for name, text, _ in RUNNER_LINES:
        f = tmp_path / (name.replace(" ", "_") + ".txt")
        f.write_text(text + "\n")
        stages.append("%s|b|cat %s >&2" % (name, f))   # stderr is counted too
    t = rows(run(*stages).stdout)
    for name, _, (passed, failed, skipped) in RUNNER_LINES:
        assert t[(name, "b")][:3] == [str(passed), str(failed), str(skipped)], name


def test_counts_add_up_over_a_stage_and_none_is_a_dash(tmp_path):
    t = rows(run("two suites|b|echo '3 passed in 1s'; echo '4 passed, 1 skipped in 2s'",
                 "no counts|b|echo hello").stdout)
    assert t[("two suites", "b")][:3] == ["7", "0", "1"]
    assert t[("no counts", "b")][:3] == ["-", "-", "-"]


def test_a_stage_sees_a_terminal_when_the_run_has_one():
    """Under a terminal each stage gets one too (as without the runner):
    what make test shows in a terminal is what the suites saw there."""
    stage = "tty|-|if test -t 1 && test -t 2; then echo STAGE-TTY; else echo STAGE-PIPE; fi"
    piped = run(stage)
    assert "STAGE-PIPE" in piped.stdout
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(TEST_RUN, [TEST_RUN, stage])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert b"STAGE-TTY" in out


def test_ctrl_c_ends_the_running_stage_and_the_run(tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group."""
    mark = tmp_path / "second-ran"
    p = subprocess.Popen([TEST_RUN, "slow|-|echo started; sleep 30", "next|-|touch %s" % mark],
                         stdout=subprocess.PIPE, text=True, start_new_session=True,
                         env=env_jobs(1),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stdout.readline().startswith("==== slow")
    assert p.stdout.readline() == "started\n"
    os.killpg(p.pid, signal.SIGINT)
    out = p.stdout.read()
    assert p.wait(timeout=10) == 128 + signal.SIGINT
    assert rows(out)[("slow", "-")][4] == "INTERRUPTED"
    assert not mark.exists()


def test_a_malformed_stage_is_refused():
    p = run("no command here")
    assert p.returncode == 2 and "STAGE|BUILD|COMMAND" in p.stderr


def test_a_bad_test_jobs_is_refused():
    for bad in ("0", "two", "-1"):
        p = run("a|-|true", jobs=bad)
        assert p.returncode == 2 and "TEST_JOBS" in p.stderr, bad
    assert run("a|-|true", jobs="auto").returncode == 0


def test_one_stage_at_a_time_unless_asked(tmp_path):
    """Without TEST_JOBS the stages run in turn: the first one waits in
    vain for what the second would make."""
    p = run("first|build|%s" % wait_for(tmp_path / "b", 20),
            "second|build/asan|touch %s" % (tmp_path / "b"))
    assert rows(p.stdout)[("first", "build")][4] == "FAILED (exit 1)", p.stdout
    assert rows(p.stdout)[("second", "build/asan")][4] == "ok"


def wait_for(path, tenths=300):
    """A stage command: wait up to tenths / 10 s for path, exit 1 if it never
    comes."""
    return ("i=0; until test -e %s; do i=$((i+1)); test $i -lt %d || exit 1; sleep 0.1; done"
            % (path, tenths))


def test_two_lanes_run_stages_of_different_builds_at_once(tmp_path):
    """Each stage waits for a file the other makes: both pass only if they
    overlap.  Each one's output is printed whole, not interleaved."""
    a, b = tmp_path / "a", tmp_path / "b"
    p = run("one|build|echo one-1; touch %s; %s; echo one-2" % (a, wait_for(b)),
            "two|build/asan|echo two-1; %s; touch %s; echo two-2" % (wait_for(a), b),
            jobs=2, logs=tmp_path / "logs")
    assert p.returncode == 0, p.stdout
    assert "one-1\none-2\n" in p.stdout and "two-1\ntwo-2\n" in p.stdout
    t = rows(p.stdout)
    assert list(t)[:2] == [("one", "build"), ("two", "build/asan")]   # the order given
    assert (tmp_path / "logs" / "01-one-build.log").read_text() == "one-1\none-2\n"
    assert (tmp_path / "logs" / "02-two-build-asan.log").read_text() == "two-1\ntwo-2\n"


def test_stages_of_one_build_never_overlap_and_keep_their_order(tmp_path):
    """The second stage on `build` starts only once the first on it ended,
    even with a lane free; a stage on another build takes that lane.  One
    at a time the stages also run in the order given."""
    first, other = tmp_path / "first-ended", tmp_path / "other-ran"
    stages = ("first|build|%s; touch %s" % (wait_for(other), first),
              "second|build|test -e %s && test -e %s" % (first, other),
              "other|build/asan|touch %s" % other)
    assert run(*stages, jobs=2).returncode == 0
    os.unlink(first)
    os.unlink(other)
    # one lane: `first` waits for `other` in vain (2 s: the lanes above
    # needed 30 s of patience only against a slow start)
    stages = ("first|build|%s; touch %s" % (wait_for(other, 20), first),) + stages[1:]
    p = run(*stages, jobs=1)
    assert rows(p.stdout)[("first", "build")][4] == "FAILED (exit 1)"
    assert rows(p.stdout)[("second", "build")][4] == "FAILED (exit 1)"


# A pytest file whose one test starts a real daemon, writes the pids of the
# daemon and its zygote, and waits to be killed.
HOLDER = textwrap.dedent("""\
    import os, sys, time
    sys.path.insert(0, %(tests)r)
    import launch

    def children(ppid):
        out = []
        for d in os.listdir("/proc"):
            try:
                with open("/proc/%%s/stat" %% d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
        return out

    def test_hold():
        d = launch.Daemon({"daemon": {"pool_size": 0}}).start()
        with open(%(dir)r, "w") as f:
            f.write(d.tmpdir)
        end = time.monotonic() + 30
        while not children(d.pid) and time.monotonic() < end:
            time.sleep(0.05)
        with open(%(pids)r + ".tmp", "w") as f:
            f.write(" ".join(str(p) for p in [os.getpid(), d.pid] + children(d.pid)))
        os.rename(%(pids)r + ".tmp", %(pids)r)
        time.sleep(120)
    """)


@pytest.fixture
def holder(tmp_path):
    """(test, pids): a suite whose one test starts a daemon, writes the pids
    of itself, the daemon and the daemon's children to `pids`, and waits to
    be killed.  Killed by a signal, it cannot remove its daemon's directory
    under /tmp, so this does once the test is over."""
    pids, daemon_dir = tmp_path / "pids", tmp_path / "daemon-dir"
    test = tmp_path / "test_holder.py"
    test.write_text(HOLDER % {"tests": os.path.dirname(os.path.dirname(TEST_RUN)) + "/tests",
                              "pids": str(pids), "dir": str(daemon_dir)})
    yield test, pids
    left = daemon_dir.read_text() if daemon_dir.exists() else ""
    if os.path.dirname(left) == "/tmp" and os.path.basename(left).startswith("sbxd-"):
        shutil.rmtree(left, ignore_errors=True)     # never a path cut short by the kill


def read_pids(path, within=60):
    end = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < end, "the suite never started its daemon"
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def test_a_suite_killed_by_sigkill_leaves_no_daemon(tmp_path, holder):
    """The daemon (and with it its zygote) dies with the suite that started
    it, even when nothing in the suite runs again."""
    test, pids = holder
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(test)], cwd=str(tmp_path), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        suite, daemon, *rest = read_pids(pids)
        assert suite == p.pid and rest, "no zygote under the daemon"
        assert alive(daemon)
        p.kill()
        p.wait()
        assert gone([daemon] + rest), "left running: %s" % [q for q in [daemon] + rest
                                                            if alive(q)]
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("to, sig", [("run", signal.SIGTERM), ("run", signal.SIGHUP),
                                     ("make", signal.SIGTERM), ("make's group", signal.SIGHUP),
                                     ("run", signal.SIGKILL)])
def test_a_signal_to_the_run_leaves_nothing_of_the_stage(tmp_path, holder, to, sig):
    """SIGTERM or SIGHUP to the run, SIGTERM to the make whose recipe it is
    (make passes it on to nobody and ends), SIGHUP to make's process group
    (a closed terminal) reach the stage's suite behind a shell; the run
    waits for it, exits 128 + the signal, and neither the suite nor its
    daemon is left.  Even SIGKILL to the run leaves nothing of its stage."""
    test, pids = holder
    stages = ["held|build|%s -m pytest -q -p no:cacheprovider %s; echo after"
              % (sys.executable, test), "next|-|touch %s" % (tmp_path / "next-ran")]
    if to != "run":                 # as the Makefile's test target runs it
        (tmp_path / "Makefile").write_text("test:\n\t+@exec %s %s\n" % (
            TEST_RUN, " ".join("'%s'" % st for st in stages)))
        argv = ["make", "-s", "-f", str(tmp_path / "Makefile")]
    else:
        argv = [TEST_RUN] + stages
    p = subprocess.Popen(argv, cwd=str(tmp_path), stdout=subprocess.PIPE, text=True,
                         start_new_session=True, env=env_jobs(1))
    try:
        procs = read_pids(pids)
        assert all(alive(q) for q in procs)
        if to == "make's group":
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        out = p.stdout.read()       # to its end: when the run is over, whoever ran it
        rc = p.wait(timeout=60)
        if to == "run" and sig != signal.SIGKILL:
            assert rc == 128 + sig, out
            assert rows(out)[("held", "build")][4] == "INTERRUPTED"
        assert gone(procs), "left running: %s" % [q for q in procs if alive(q)]
        assert not (tmp_path / "next-ran").exists()
    finally:
        p.kill()
        p.wait()


def test_a_stage_past_stage_timeout_is_stopped_and_the_next_one_runs(tmp_path):
    """A hung suite (here a child that outlives its shell and holds the
    output) ends its own stage as TIMED OUT, not the run."""
    env = dict(env_jobs(None), STAGE_TIMEOUT="2")
    t0 = time.monotonic()
    p = subprocess.run([TEST_RUN, "hang|build|sleep 600 & wait", "next|-|echo after"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert time.monotonic() - t0 < 40
    assert p.returncode == 1, p.stdout
    t = rows(p.stdout)
    assert t[("hang", "build")][4] == "TIMED OUT", p.stdout
    assert t[("next", "-")][4] == "ok" and "after\n" in p.stdout
    assert "still running after 2 s (STAGE_TIMEOUT)" in p.stdout
    for bad in ("0", "soon"):
        q = subprocess.run([TEST_RUN, "a|-|true"], capture_output=True, text=True,
                           timeout=30, env=dict(env, STAGE_TIMEOUT=bad))
        assert q.returncode == 2 and "STAGE_TIMEOUT" in q.stderr, bad
