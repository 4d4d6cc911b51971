"""Every command and example of the top README, run as written against the
real daemon (the sample sandboxd.conf, listening on build/sandboxd.sock of a
scratch directory, as `make run` leaves it), and its output compared with
what the README shows.

Each fenced block and each command in backticks must be claimed by a check
here (or name the suite that runs it, or say why it is not run), so that an
example added without a check fails this suite.  The one liberty taken:
/tmp/ in a command becomes this test's own directory, so that two runs do
not share files.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))
import launch  # noqa: E402

SANDBOXCTL_BIN = os.environ.get("SANDBOXCTL_BIN") or os.path.join(REPO, "build", "sandboxctl")
NODE_ENTRY = os.path.join(REPO, "client", "node", "src", "index.js")


def readme():
    with open(os.path.join(REPO, "README.md")) as f:
        return f.read()


def blocks(text=None):
    """[(language, body)] of the fenced blocks, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text or readme(), re.S | re.M)


def transcript(body):
    """A ```sh block written as a terminal session: [(command, expected
    output lines)], continuation lines joined."""
    steps, cmd = [], None
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd + "\n" + lines[i]
            steps.append((cmd, []))
        else:
            steps[-1][1].append(line)
        i += 1
    return steps


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A scratch directory laid out as a checkout after `make run`:
    build/sandboxctl, and the daemon from the sample config listening on
    build/sandboxd.sock; the client packages and examples where they are."""
    d = tmp_path_factory.mktemp("readme")
    (d / "build").mkdir()
    os.symlink(SANDBOXCTL_BIN, d / "build" / "sandboxctl")
    for p in ("client", "examples"):
        os.symlink(os.path.join(REPO, p), d / p)
    with open(os.path.join(REPO, "sandboxd.conf")) as f:
        conf = f.read()
    daemon = launch.Daemon(config_text=conf, socket_path=str(d / "build" / "sandboxd.sock"))
    daemon.start()
    yield d
    daemon.stop_and_check()


def sh(checkout, cmd, env=None):
    cmd = cmd.replace("/tmp/", str(checkout) + "/")
    p = subprocess.run(["/bin/bash", "-c", cmd], cwd=str(checkout), capture_output=True,
                       text=True, timeout=60 * launch.SCALE, env=dict(os.environ, **(env or {})))
    return p


def exported():
    """The variables the README's sessions export: a reader's shell keeps
    them for the blocks after it."""
    return dict(re.findall(r"^\$ export (\w+)=(\S+)$", readme(), re.M))


def run_transcript(checkout, body):
    for cmd, expected in transcript(body):
        if cmd.startswith("export "):
            continue
        p = sh(checkout, cmd, exported())
        assert p.returncode == 0, (cmd, p.stdout, p.stderr)
        yield cmd, expected, p


# ---------------------------------------------------------------- the blocks

def check_first_commands(checkout, body):
    """`make run` and `make test`, the README's first two commands: their
    targets exist (they are run by hand and by CI, not from inside make test)."""
    cmds = [ln.split("#")[0].strip() for ln in body.splitlines()]
    assert cmds == ["make run", "make test"], cmds
    with open(os.path.join(REPO, "Makefile")) as f:
        mk = f.read()
    assert re.search(r"^run: ", mk, re.M) and re.search(r"^test: ", mk, re.M)


def check_session(checkout, body):
    """sandboxctl exec, print to stderr and the value to stdout, bindings
    saved and loaded, a tool answered by a shell command."""
    steps = list(run_transcript(checkout, body))
    assert len(steps) == 2
    for cmd, expected, p in steps:
        out = p.stdout.splitlines()
        err = p.stderr.splitlines()
        # the README shows the terminal: stderr's print lines, then the value
        assert err + out == expected, (cmd, p.stdout, p.stderr)
    assert steps[0][2].stderr == "hi\n" and steps[0][2].stdout == "42\n"


def check_raw_socket(checkout, body):
    """The raw JSON-RPC exchange: the same members, in the order the daemon
    sends them, with the same values ({...} stands for any object)."""
    [(cmd, expected, p)] = list(run_transcript(checkout, body))
    assert len(expected) == 1
    got = json.loads(p.stdout, object_pairs_hook=list)
    want = json.loads(expected[0].replace("{...}", '"<any object>"'), object_pairs_hook=list)

    def same(w, g, where):
        if w == "<any object>":
            assert isinstance(g, list) and all(isinstance(kv, tuple) for kv in g), where
            return
        if isinstance(w, list) and w and all(isinstance(kv, tuple) for kv in w):
            assert [k for k, _ in g] == [k for k, _ in w], \
                "%s: the daemon sends %s, the README shows %s" % (
                    where, [k for k, _ in g], [k for k, _ in w])
            for (k, wv), (_, gv) in zip(w, g):
                same(wv, gv, where + "." + k)
        else:
            assert g == w, where
    same(want, got, "answer")


def check_session_repl(checkout, body):
    for cmd, expected, p in run_transcript(checkout, body):
        assert p.stdout.splitlines() == expected, (cmd, p.stdout, p.stderr)


def check_node_client(checkout, body):
    """The Node client's example prints what its comment says."""
    want = re.search(r"console\.log\(r\.value\);\s*// (\S+)", body).group(1)
    code = body.replace("from 'sandboxd'", "from %s" % json.dumps(NODE_ENTRY))
    (checkout / "readme.mjs").write_text(code)
    p = subprocess.run(["node", "readme.mjs"], cwd=str(checkout), capture_output=True, text=True,
                       timeout=60 * launch.SCALE, env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == want + "\n"


def check_mcp_config(checkout, body):
    """The host's config for the bridge: valid JSON, the bridge where it
    names it, and the options it passes are the bridge's own."""
    conf = json.loads(body)["mcpServers"]["sandboxd"]
    assert conf["command"] == "node"
    script = conf["args"][0].replace("/path/to/sandboxd/", REPO + "/")
    assert os.path.isfile(script), script
    with open(script) as f:
        usage = re.search(r"^const USAGE = '(.*)'", f.read(), re.M).group(1)
    for opt in [a for a in conf["args"] if a.startswith("--")]:
        assert "[%s " % opt in usage or " %s " % opt in usage, (opt, usage)


def check_python_install(checkout, body):
    """Run as written (into a venv under $HOME, and in place) by
    client/python/tests/test_package.py::test_readme_install_commands_work,
    which reads these lines from this README."""
    with open(os.path.join(REPO, "client", "python", "tests", "test_package.py")) as f:
        suite = f.read()
    assert "def test_readme_install_commands_work" in suite
    lines = [ln.split("  #")[0].strip() for ln in body.splitlines()]
    assert any(" -m venv " in ln for ln in lines) and \
        any(ln.startswith("PYTHONPATH=client/python ") for ln in lines), lines


def check_python_client(checkout, body):
    want = re.search(r"print\(r\.value\)\s*# (\S+)", body).group(1)
    p = subprocess.run([sys.executable, "-c", body], cwd=str(checkout), capture_output=True,
                       text=True, timeout=60 * launch.SCALE,
                       env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "client", "python")))
    assert p.returncode == 0, p.stderr
    assert p.stdout == want + "\n"


# (language, how the block starts): its check
BLOCKS = [
    ("sh", "make run ", check_first_commands),
    ("sh", "$ export SANDBOXD_SOCKET=", check_session),
    ("sh", "$ echo '{\"jsonrpc\"", check_raw_socket),
    ("sh", "$ printf ", check_session_repl),
    ("js", "import { Client } from 'sandboxd';", check_node_client),
    ("json", '{"mcpServers": {"sandboxd"', check_mcp_config),
    ("sh", "python3 -m venv ", check_python_install),
    ("python", "import sandboxd\n", check_python_client),
]


def claim(lang, body):
    found = [c for (l, start, c) in BLOCKS if l == lang and body.startswith(start)]
    assert len(found) == 1, "no check in tests/readme for this ```%s block:\n%s" % (lang, body)
    return found[0]


def test_every_block_has_a_check():
    bs = blocks()
    assert len(bs) == len(BLOCKS)
    for lang, body in bs:
        claim(lang, body)


def test_a_new_block_without_a_check_is_caught():
    with pytest.raises(AssertionError, match="no check in tests/readme"):
        claim("sh", "$ build/sandboxctl frobnicate\n")


@pytest.mark.parametrize("lang,start,check", BLOCKS, ids=[c.__name__ for _, _, c in BLOCKS])
def test_block(checkout, lang, start, check):
    [body] = [b for l, b in blocks() if l == lang and b.startswith(start)]
    check(checkout, body)


# ------------------------------------------------- commands in the prose

def check_ran(checkout, cmd):
    p = sh(checkout, cmd)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p


def run_metrics(checkout, cmd):
    p = check_ran(checkout, "SANDBOXD_SOCKET=build/sandboxd.sock " + cmd)
    assert "# TYPE sandboxd_executions_total counter" in p.stdout, p.stdout[:500]


def run_install_deps_list(checkout, cmd):
    p = subprocess.run(cmd, shell=True, cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and "liblua5.3-dev" in p.stdout.split(), p.stdout


def run_install_deps_group(checkout, cmd):
    """A group of scripts/install-deps, and the Makefile's use of it: make
    installs build's packages, the tests test's (build's and more), and run's
    are the shared libraries only."""
    def group(g):
        p = subprocess.run(["scripts/install-deps", "--list", g], cwd=REPO, capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()
    g = cmd.split()[1]
    pkgs = group(g)
    if g == "build":
        assert "liblua5.3-dev" in pkgs and "libcmocka-dev" not in pkgs, pkgs
    elif g == "test":
        assert set(group("build")) <= set(pkgs) and "libcmocka-dev" in pkgs, pkgs
    else:
        assert pkgs and all(p.startswith("lib") and not p.endswith("-dev") for p in pkgs), pkgs
    if g != "run":                      # run's is for a machine that only runs sandboxd
        with open(os.path.join(REPO, "Makefile")) as f:
            mk = f.read()
        assert "\nINSTALL_DEPS ?= scripts/install-deps\n" in mk
        assert "\t@%s\n" % cmd.replace("scripts/install-deps", "$(INSTALL_DEPS)") in mk, cmd


def run_man(checkout, cmd):
    p = subprocess.run(cmd.replace("man ", "man -P cat ", 1), shell=True, cwd=REPO,
                       capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
    assert p.returncode == 0 and "sandboxctl" in p.stdout, p.stderr


def run_session(checkout, cmd):
    p = subprocess.run(["/bin/bash", "-c", "SANDBOXD_SOCKET=build/sandboxd.sock " + cmd],
                       input="return 6 * 7\n", cwd=str(checkout), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "42\n", (p.stdout, p.stderr)


def run_stream(checkout, cmd):
    p = check_ran(checkout, "SANDBOXD_SOCKET=build/sandboxd.sock " + cmd +
                  " -e 'print(\"a\"); return 1'")
    assert p.stdout == "1\n" and p.stderr == "a\n", (p.stdout, p.stderr)


def install_make(checkout, cmd):
    """The line that gives a Debian 12 without make the one package the
    first command needs: apt-get (simulated, which needs no root) resolves
    it, and what make runs first installs the rest without make itself."""
    p = subprocess.run(["apt-get", "install", "-s", "-y", "make"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, LC_ALL="C"))
    assert p.returncode == 0 and re.search(r"^(Inst make |make is already)", p.stdout, re.M), \
        p.stdout + p.stderr
    with open(os.path.join(REPO, "scripts", "install-deps")) as f:
        assert f.readline() == "#!/bin/sh\n"
    p = subprocess.run(["scripts/install-deps", "--list"], cwd=REPO, capture_output=True,
                       text=True)
    assert "build-essential" in p.stdout.split(), p.stdout


def make_target(checkout, cmd):
    target = cmd.split()[1] if len(cmd.split()) > 1 else "all"
    with open(os.path.join(REPO, "Makefile")) as f:
        assert re.search(r"^%s:" % re.escape(target), f.read(), re.M), cmd


def npm_ci(checkout, cmd):
    """What make test runs to install client/mcp, client/mcp/hosts and
    bench/jsvm: this npm ci, through scripts/npm-ci (which names a
    registry problem when it fails)."""
    with open(os.path.join(REPO, "Makefile")) as f:
        mk = f.read()
    with open(os.path.join(REPO, "bench", "Makefile")) as f:
        bench = f.read()
    assert "\tscripts/npm-ci client/mcp\n" in mk and "\tscripts/npm-ci client/mcp/hosts\n" in mk
    assert "\t../scripts/npm-ci jsvm\n" in bench
    with open(os.path.join(REPO, "scripts", "npm-ci")) as f:
        assert '(cd "$dir" && npm ci --no-audit --no-fund)' in f.read()


def run_npm_install_node(checkout, cmd):
    """The Node client installed from the checkout, then imported by name
    (it has no dependencies: nothing comes from the registry)."""
    env = dict(os.environ, npm_config_offline="true", npm_config_audit="false",
               npm_config_fund="false", npm_config_update_notifier="false")
    proj = checkout / "npm-install"
    proj.mkdir()
    os.symlink(os.path.join(REPO, "client"), proj / "client")
    p = subprocess.run(cmd, shell=True, cwd=str(proj), env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(["node", "--input-type=module", "-e",
                        "import { Client } from 'sandboxd'; console.log(typeof Client)"],
                       cwd=str(proj), capture_output=True, text=True, timeout=60)
    assert p.stdout == "function\n", p.stderr


def inspector_cli(checkout, cmd):
    """The MCP Inspector's CLI is downloaded from npm: client/mcp/hosts
    runs the Inspector commands of client/mcp/README.md, this one among
    them, from its locked copy in make test's Node stage."""
    with open(os.path.join(REPO, "client", "mcp", "README.md")) as f:
        assert "\n" + cmd + "\n" in f.read()
    with open(os.path.join(REPO, "client", "mcp", "hosts", "test", "inspector.test.mjs")) as f:
        assert "const [list, call] = cmds;" in f.read()


# `command` in the prose: its check.  Make targets are run by hand, by CI or
# by make test itself (each is a stage of it or a campaign of its own);
# here they are only checked to exist.
COMMANDS = {
    "build/sandboxctl metrics": run_metrics,
    "build/sandboxctl session": run_session,
    "sandboxctl exec --stream": lambda c, cmd: run_stream(c, "build/" + cmd),
    "scripts/install-deps --list": run_install_deps_list,
    "scripts/install-deps build": run_install_deps_group,
    "scripts/install-deps test": run_install_deps_group,
    "scripts/install-deps run": run_install_deps_group,
    "sudo apt-get update && sudo apt-get install -y make": install_make,
    "man docs/sandboxctl.1": run_man,
    "cd client/mcp && npm ci": npm_ci,
    "npm ci": npm_ci,
    "npm install ./client/node": run_npm_install_node,
    "npx @modelcontextprotocol/inspector --cli --method tools/list -- node sandboxd-mcp.js "
    "--config servers.json": inspector_cli,
}
COMMAND_RE = re.compile(r"`((?:make|build/sandboxctl|sandboxctl|scripts/|man|cd|npm|npx|pip|"
                        r"python3|PYTHONPATH|node|sudo|socat)(?: [^`]*)?)`")
NOT_COMMANDS = {"pip install", "make", "sandboxctl", "scripts/install-deps", "scripts/node18",
                "python3", "npm", "socat", "node", "man", "sudo"}   # names in the text, not commands to run


def prose_commands():
    text = re.sub(r"^```.*?^```", "", readme(), flags=re.S | re.M)
    cmds = []
    for c in COMMAND_RE.findall(text):
        c = re.sub(r"\s+", " ", c)
        if c.startswith("scripts/") and " " not in c or c in NOT_COMMANDS:
            continue
        if c not in cmds:
            cmds.append(c)
    return cmds


def test_every_command_in_the_prose_has_a_check():
    missing = [c for c in prose_commands()
               if c not in COMMANDS and not re.fullmatch(r"make [\w-]+", c)]
    assert not missing, "no check in tests/readme for %s" % missing


@pytest.mark.parametrize("cmd", prose_commands())
def test_prose_command(checkout, cmd):
    COMMANDS.get(cmd, make_target)(checkout, cmd)


# ---------------------------------------------------- what make test runs

def stages_in_makefile():
    with open(os.path.join(REPO, "Makefile")) as f:
        mk = f.read()
    block = re.search(r"^TEST_STAGES := \\\n((?:  '.*' ?\\?\n)+)", mk, re.M).group(1)
    return [tuple(m) for m in re.findall(r"'([^|']+)\|([^|']+)\|", block)]


def stages_in_readme():
    text = readme()
    table = text[text.index("| stage | build |"):].split("\n\n")[0].splitlines()[2:]
    return [tuple(c.strip().strip("`") for c in row.strip("|").split("|")[:2]) for row in table]


def test_readme_lists_each_stage_of_make_test_on_its_build():
    """The README says exactly what make test runs on which build: its
    table is TEST_STAGES, in order."""
    assert stages_in_readme() == stages_in_makefile()
