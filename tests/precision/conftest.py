"""Fixtures of the precision suite (tests/precision/README.md); the machinery
is in harness.py.

  programs   [(name, source)]: programs/*.lua, then the generated variants
  needs      {name: measurement}: each program's needs, from the caches or
             measured now
  daemon     one sandboxd for the session, on a temporary socket

After the run, the terminal summary and build/precision/report.md give each
program's needs and the verdict of each of its three runs, with the counts
of false positives and wrong verdicts.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402


@pytest.fixture(scope="session")
def programs():
    return harness.all_programs()


@pytest.fixture(scope="session")
def needs(programs):
    return harness.load_needs(programs)


@pytest.fixture(scope="session")
def daemon():
    d = harness.ic.Daemon(config=harness.ic.merge_config(**harness.DAEMON_CONFIG))
    try:
        d.start()
    except BaseException:
        d.cleanup()
        raise
    yield d
    d.stop_and_check()


def pytest_terminal_summary(terminalreporter):
    if not harness.RESULTS:
        return
    lines = harness.report_lines()
    os.makedirs(os.path.dirname(harness.REPORT), exist_ok=True)
    with open(harness.REPORT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    terminalreporter.section("precision")
    for line in [lines[0]] + [l for l in lines[1:] if l and not l.startswith("|")]:
        terminalreporter.write_line(line)
    terminalreporter.write_line("every program's needs and verdicts: %s" % harness.REPORT)
