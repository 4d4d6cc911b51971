"""The release's artefacts (make dist), each tested from the artefact: the
client packages installed into clean places (a virtual environment, a
fresh npm project) and their README examples run against the daemon from
the Debian package (its binary and its conffile, unpacked with dpkg-deb:
tests/systemd/test_deb.py installs the package itself in a booted Debian
12).  Run through `make test-dist`, which builds dist/ first.  The MCP case
takes the bridge's runtime dependency (the MCP SDK) and the README's two
MCP servers from the npm registry, at the versions client/mcp's lock file
tests with.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))
import launch  # noqa: E402

DIST = os.environ.get("SANDBOXD_DIST") or os.path.join(REPO, "dist")
with open(os.path.join(REPO, "VERSION")) as _f:
    V = _f.read().strip()
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                      text=True).stdout.strip()
NAMES = {
    "source": "sandboxd-source-%s.tar.gz" % V,
    "deb": "sandboxd_%s-1_%s.deb" % (V, ARCH),
    "node": "sandboxd-%s.tgz" % V,
    "mcp": "sandboxd-mcp-%s.tgz" % V,
    "wheel": "sandboxd-%s-py3-none-any.whl" % V,
    "sdist": "sandboxd-%s.tar.gz" % V,
}
NPM_ENV = dict(os.environ, npm_config_audit="false", npm_config_fund="false",
               npm_config_update_notifier="false", NO_COLOR="1")

if not os.path.exists(os.path.join(DIST, "SHA256SUMS")):
    pytest.skip("no dist/SHA256SUMS: run through make test-dist", allow_module_level=True)


def art(kind):
    return os.path.join(DIST, NAMES[kind])


def run(cmd, **kw):
    kw.setdefault("timeout", 300)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p


def readme_block(path, lang, start=""):
    with open(os.path.join(REPO, path)) as f:
        text = f.read()
    found = [b for b in re.findall(r"^```%s\n(.*?)^```" % lang, text, re.S | re.M)
             if b.startswith(start)]
    assert found, (path, lang, start)
    return found[0]


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    """The Debian package unpacked: its binaries and conffile."""
    d = tmp_path_factory.mktemp("deb")
    run(["dpkg-deb", "-x", art("deb"), str(d)])
    return d


@pytest.fixture(scope="module")
def daemon(packaged):
    """The packaged daemon with the packaged config; the workers' user is the
    package's sandboxd-worker, which only an installed package creates, so
    here they run as the sample's nobody."""
    with open(packaged / "etc/sandboxd/sandboxd.conf") as f:
        conf = f.read()
    assert "\nuser = sandboxd-worker\n" in conf
    conf = conf.replace("\nuser = sandboxd-worker\n", "\nuser = nobody\n") \
               .replace("\ngroup = sandboxd-worker\n", "\ngroup = nogroup\n")
    d = launch.Daemon(config_text=conf, binary=str(packaged / "usr/sbin/sandboxd"))
    d.start()
    yield d
    d.stop_and_check()


# ------------------------------------------------------------------ the folder

def test_sha256sums_name_every_artefact_and_match():
    with open(os.path.join(DIST, "SHA256SUMS")) as f:
        sums = dict(reversed(line.split("  ", 1)) for line in f.read().splitlines())
    sums = {k.strip(): v for k, v in sums.items()}
    assert sorted(sums) == sorted(NAMES.values()), sums
    for name, digest in sums.items():
        with open(os.path.join(DIST, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name


def test_source_tarball_is_the_tree():
    with tarfile.open(art("source")) as t:
        names = t.getnames()
    top = "sandboxd-%s/" % V
    assert all(n.startswith(top) for n in names)
    for f in ("VERSION", "LICENSE", "NOTICE", "CHANGELOG.md", "Makefile", "debian/rules",
              "daemon/main.c", "client/mcp/package-lock.json"):
        assert top + f in names, f
    assert not [n for n in names if "/node_modules/" in n or n.startswith(top + "build/")
                or n.startswith(top + "dist/")]


def test_debian_package_holds_the_release(packaged):
    info = run(["dpkg-deb", "-f", art("deb"), "Package", "Version", "Depends"]).stdout
    assert "Package: sandboxd\n" in info and "Version: %s-1\n" % V in info, info
    for lib in ("liblua5.3-0", "libjansson4", "libev4", "libseccomp2", "libinih1"):
        assert lib in info, lib
    p = run([str(packaged / "usr/sbin/sandboxd"), "--version"])
    assert p.stdout.startswith("sandboxd %s (protocol " % V), p.stdout
    assert run([str(packaged / "usr/bin/sandboxctl"), "--version"]).stdout == "sandboxctl %s\n" % V
    assert os.path.isfile(packaged / "usr/share/doc/sandboxd/NOTICE")


# ------------------------------------------------------------------ Node

def test_node_client_from_its_tarball(tmp_path, daemon):
    """npm install ./sandboxd-V.tgz in a new project (offline: no
    dependencies), then client/node/README.md's example."""
    proj = tmp_path / "app"
    proj.mkdir()
    (proj / "package.json").write_text('{"name": "app", "private": true, "type": "module"}\n')
    run(["npm", "install", "--offline", art("node")], cwd=str(proj), env=NPM_ENV)
    pkg = json.loads((proj / "node_modules/sandboxd/package.json").read_text())
    assert pkg["version"] == V and pkg["license"] == "MIT"
    assert (proj / "node_modules/sandboxd/LICENSE").exists()
    code = readme_block("client/node/README.md", "js", "import { Client }")
    want = re.search(r"console\.log\(r\.value, r\.stats\.tool_calls\);\s*// (.*)$", code, re.M)
    code = code.replace("'build/sandboxd.sock'", json.dumps(daemon.socket_path))
    (proj / "example.mjs").write_text(code)
    p = run(["node", "example.mjs"], cwd=str(proj), env=NPM_ENV, timeout=60)
    assert p.stdout.splitlines() == ["to ann@example.com: It is 21 degrees", want.group(1)], p


# ------------------------------------------------------------------ MCP

MCP_CALL = r"""
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
const [bridge, config, socket, code] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: process.execPath,
  args: [bridge, '--config', config, '--socket', socket], stderr: 'inherit' });
const host = new Client({ name: 'dist-test', version: '1.0.0' });
await host.connect(transport);
const tools = (await host.listTools()).tools.map((t) => t.name);
const r = await host.callTool({ name: 'execute_lua', arguments: { code } });
console.log(JSON.stringify({ tools, server: host.getServerVersion(), result: r }));
await host.close();
"""


def test_mcp_bridge_from_its_tarball(tmp_path, daemon):
    """npm install of the two tarballs (the bridge takes the Node client
    from the first) and of the README's MCP servers, in a new project; then
    client/mcp/README.md's example chunk, as execute_lua's code from an MCP
    client, over notes files written here."""
    with open(os.path.join(REPO, "client", "mcp", "package.json")) as f:
        dev = json.load(f)["devDependencies"]
    proj = tmp_path / "app"
    proj.mkdir()
    (proj / "package.json").write_text('{"name": "app", "private": true, "type": "module"}\n')
    servers = ["@modelcontextprotocol/server-everything@" + dev["@modelcontextprotocol/server-everything"],
               "@modelcontextprotocol/server-filesystem@" + dev["@modelcontextprotocol/server-filesystem"]]
    run(["npm", "install", art("node"), art("mcp")] + servers, cwd=str(proj), env=NPM_ENV,
        timeout=600)
    lock = json.loads((proj / "package-lock.json").read_text())["packages"]
    assert lock["node_modules/sandboxd"]["resolved"].endswith(NAMES["node"]), \
        lock["node_modules/sandboxd"]
    assert lock["node_modules/sandboxd-mcp"]["version"] == V
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, n in (("a.txt", "3"), ("b.txt", "4"), ("c.md", "100")):
        (notes / name).write_text(n)
    mods = proj / "node_modules" / "@modelcontextprotocol"
    bin_of = lambda d: str(d / json.loads((d / "package.json").read_text())["bin"].popitem()[1])
    config = {"mcpServers": {
        "everything": {"command": "node", "args": [bin_of(mods / "server-everything"), "stdio"]},
        "filesystem": {"command": "node", "args": [bin_of(mods / "server-filesystem"), str(notes)],
                       "deny": ["write_file", "edit_file", "move_file"]},
    }}
    (proj / "servers.json").write_text(json.dumps(config))
    (proj / "call.mjs").write_text(MCP_CALL)
    code = readme_block("client/mcp/README.md", "lua").replace("/home/me/notes", str(notes))
    bridge = proj / "node_modules" / ".bin" / "sandboxd-mcp"
    p = run(["node", "call.mjs", os.path.realpath(bridge), "servers.json", daemon.socket_path, code],
            cwd=str(proj), env=NPM_ENV, timeout=120)
    out = json.loads(p.stdout)
    assert out["tools"] == ["execute_lua"] and out["server"]["version"] == V, out
    result = out["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["value"] == {"total": 7, "error_seen": True}, result


# ------------------------------------------------------------------ Python

def python_example(tmp_path, python, daemon):
    """client/python/README.md's first example, its commented values
    checked: `EXPR  # VALUE` lines become assertions."""
    code = readme_block("client/python/README.md", "python", "import sandboxd")
    lines = []
    for line in code.splitlines():
        m = re.match(r"^(\s*)(\S.*?)\s+# (.*)$", line)
        if m:
            try:
                compile(m.group(3), "<value>", "eval")
                compile(m.group(2), "<expr>", "eval")
                line = "%sassert (%s) == (%s), (%s)" % (m.group(1), m.group(2), m.group(3),
                                                       m.group(2))
            except SyntaxError:
                pass
        lines.append(line)
    checked = "\n".join(lines)
    assert checked.count("assert (") == 2, checked
    script = tmp_path / "example.py"
    script.write_text(checked + "\nprint(sandboxd.__version__, sandboxd.__file__)\n")
    p = run([python, str(script)], cwd=str(tmp_path), timeout=60,
            env=dict(os.environ, SANDBOXD_SOCKET=daemon.socket_path, PYTHONPATH=""))
    version, where = p.stdout.split()
    assert version == V and where.startswith(str(tmp_path)), p.stdout


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_python_client_from_its_wheel_and_sdist(tmp_path, daemon, kind):
    """pip install of the wheel, and of the sdist (built by its own backend,
    offline), each into a new virtual environment; then the README's
    example."""
    venv = tmp_path / "venv"
    run(["/usr/bin/python3", "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    run(pip + ["install", "--no-index", art(kind)], env=dict(os.environ, PIP_NO_INPUT="1"))
    if kind == "wheel":
        with zipfile.ZipFile(art(kind)) as z:
            assert "sandboxd-%s.dist-info/LICENSE" % V in z.namelist()
    python_example(tmp_path, str(venv / "bin" / "python"), daemon)
