"""scripts/install-deps by purpose, and which group each make target asks
for: `make` (and `make run`) only build's, the tests test's."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPS = os.path.join(REPO, "scripts", "install-deps")


def listed(*groups):
    p = subprocess.run([DEPS, "--list"] + list(groups), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_groups():
    build, run, test = listed("build"), listed("run"), listed("test")
    assert len(build) == len(set(build)) and len(test) == len(set(test))
    assert {"build-essential", "pkg-config", "liblua5.3-dev", "libjansson-dev", "libev-dev",
            "libseccomp-dev", "libinih-dev"} <= set(build)
    assert "libcmocka-dev" not in build and "clang" not in build and "python3-pytest" not in build
    assert set(build) <= set(test) and "libcmocka-dev" in test and "lintian" in test
    assert run == ["liblua5.3-0", "libjansson4", "libev4", "libseccomp2", "libinih1"]
    # no group: all three, each package once, as the no-argument install
    assert sorted(listed()) == sorted(set(build) | set(run) | set(test))
    assert listed("build", "--list") == build == listed("build", "build")


def test_unknown_group_is_refused():
    p = subprocess.run([DEPS, "dev"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "usage: scripts/install-deps" in p.stderr, p.stderr


def test_run_group_is_what_the_binaries_link():
    """run's libraries are the ones whose headers build installs (the -dev
    packages of Debian 12 each depend on exactly this shared library)."""
    for lib in listed("run"):
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", lib], capture_output=True,
                           text=True)
        assert "install ok installed" in p.stdout, lib
    need = set()
    for dev in [d for d in listed("build") if d.endswith("-dev")]:
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Depends}", dev], capture_output=True,
                           text=True)
        need |= {d.split()[0] for d in p.stdout.split(",") if d.strip()}
    assert set(listed("run")) <= need, (listed("run"), need)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the checkout whose install-deps records its arguments."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    d = tmp_path_factory.mktemp("deps") / "tree"
    files = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True,
                           check=True).stdout.split(b"\0")
    for f in filter(None, files):
        src, dst = os.path.join(REPO, os.fsdecode(f)), os.path.join(d, os.fsdecode(f))
        if os.path.isfile(src) and not os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    log = d.parent / "calls"
    with open(os.path.join(d, "scripts", "install-deps"), "w") as f:
        f.write('#!/bin/sh\necho "$*" >> %s\n' % log)
    os.chmod(os.path.join(d, "scripts", "install-deps"), 0o755)
    return d, log


def make_n(tree, *goals):
    d, log = tree
    env = dict(os.environ)
    for var in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "O", "SANITIZE", "EXTRA_CPPFLAGS"):
        env.pop(var, None)
    if os.path.exists(log):
        os.unlink(log)
    shutil.rmtree(os.path.join(d, "build"), ignore_errors=True)
    p = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(d)] + list(goals),
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = open(log).read().splitlines() if os.path.exists(log) else []
    return calls, p.stdout


def test_make_installs_only_the_build_group(tree):
    calls, out = make_n(tree, "all")
    assert calls == ["build"], calls
    assert "install-deps test" not in out, out
    calls, out = make_n(tree, "run")
    assert calls == ["build"] and "install-deps test" not in out, (calls, out)


@pytest.mark.parametrize("goal", ["test", "test-unit", "test-integration", "asan", "fuzz",
                                  "check-house", "test-node"])
def test_test_targets_install_the_test_group(tree, goal):
    calls, out = make_n(tree, goal)
    assert calls == ["build"], calls            # config.mk is remade even under -n
    assert "scripts/install-deps test\n" in out, out[:2000]


def test_debian_build_depends_are_the_build_group():
    """debian/control's Build-Depends name build's libraries and tools (less
    build-essential, which Debian implies, and socat, which only make run
    uses), and nothing else but debhelper."""
    with open(os.path.join(REPO, "debian", "control")) as f:
        text = f.read()
    field = text.split("\nBuild-Depends:", 1)[1].split("\nStandards-Version:", 1)[0]
    deps = [d.strip() for d in field.replace("\n", " ").split(",") if d.strip()]
    assert deps[0] == "debhelper-compat (= 13)", deps
    assert sorted(deps[1:]) == sorted(set(listed("build")) - {"build-essential", "socat"}), deps
