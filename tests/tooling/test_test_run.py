"""scripts/test-run, make test's runner: every stage runs even after one
failed, each stage's counts come from its runners' own summary lines, the
table closes the run and the exit status says whether any stage failed;
a suite killed leaves none of the daemons it started."""
import os
import pty
import re
import signal
import subprocess
import sys
import textwrap
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_RUN = os.path.join(REPO, "scripts", "test-run")


def run(*stages, summary=None):
    argv = [TEST_RUN] + (["--summary", str(summary)] if summary else []) + list(stages)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


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


def test_every_stage_runs_after_a_failure_and_the_run_fails_at_the_end(tmp_path):
    p = run("first|build|echo one; exit 3", "second|build/asan|echo two",
            summary=tmp_path / "s.txt")
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
        end = time.monotonic() + 30
        while not children(d.pid) and time.monotonic() < end:
            time.sleep(0.05)
        with open(%(pids)r + ".tmp", "w") as f:
            f.write(" ".join(str(p) for p in [os.getpid(), d.pid] + children(d.pid)))
        os.rename(%(pids)r + ".tmp", %(pids)r)
        time.sleep(120)
    """)


def holder(tmp_path):
    pids = tmp_path / "pids"
    test = tmp_path / "test_holder.py"
    test.write_text(HOLDER % {"tests": os.path.dirname(os.path.dirname(TEST_RUN)) + "/tests",
                              "pids": str(pids)})
    return test, pids


def read_pids(path, within=60):
    end = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < end, "the suite never started its daemon"
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pids, within=10.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_suite_killed_by_sigkill_leaves_no_daemon(tmp_path):
    """The daemon (and with it its zygote) dies with the suite that started
    it, even when nothing in the suite runs again."""
    test, pids = holder(tmp_path)
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
