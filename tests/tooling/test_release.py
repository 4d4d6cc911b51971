"""The release's facts kept in one place each: the licence every package
declares is the repository's LICENSE."""
import json
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(*path):
    with open(os.path.join(REPO, *path)) as f:
        return f.read()


def test_license_is_mit_and_every_package_says_so():
    assert read("LICENSE").startswith("MIT License\n\nCopyright (c) 2026 the sandboxd authors\n")
    for p in ("client/node/package.json", "client/mcp/package.json"):
        assert json.loads(read(p))["license"] == "MIT", p
    for p in ("client/node/package-lock.json", "client/mcp/package-lock.json"):
        assert json.loads(read(p))["packages"][""]["license"] == "MIT", p
    assert re.search(r'^license = \{text = "MIT"\}$', read("client/python/pyproject.toml"), re.M)
    assert 'package: [licenses: ["MIT"]' in read("client/elixir/mix.exs")
    notice = read("NOTICE")
    assert "Licensed under the MIT License: see LICENSE." in notice
    for lib in ("liblua5.3", "jansson", "libev", "libseccomp", "libinih"):
        assert "\n  %s (" % lib in notice, lib


# ------------------------------------------------------------------ one version

def version():
    v = read("VERSION")
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", v), v
    return v.strip()


def copies():
    """Every copy of the release's version outside VERSION: (where, value)."""
    node, mcp = json.loads(read("client/node/package.json")), json.loads(read("client/mcp/package.json"))
    nlock, mlock = (json.loads(read("client/node/package-lock.json")),
                    json.loads(read("client/mcp/package-lock.json")))
    yield "client/node/package.json", node["version"]
    yield "client/node/package-lock.json", nlock["version"]
    yield "client/node/package-lock.json packages['']", nlock["packages"][""]["version"]
    yield "client/mcp/package.json", mcp["version"]
    yield "client/mcp/package-lock.json", mlock["version"]
    yield "client/mcp/package-lock.json packages['']", mlock["packages"][""]["version"]
    yield "client/mcp/package-lock.json packages['../node']", mlock["packages"]["../node"]["version"]
    for f, pat in [
        ("client/mcp/src/bridge.js", r"^export const VERSION = '([^']*)';$"),
        ("client/mcp/src/downstream.js", r"^const VERSION = '([^']*)';$"),
        ("client/python/pyproject.toml", r'^version = "([^"]*)"$'),
        ("client/python/sandboxd/__init__.py", r'^__version__ = "([^"]*)"$'),
        ("client/elixir/mix.exs", r'^      version: "([^"]*)",$'),
        ("docs/sandboxd.8", r"^\.Pq Dq sandboxd (\S+) \(protocol [\d.]+\)$"),
        ("docs/protocol.md", r'"result":\{"name":"sandboxd","version":"([^"]*)"'),
        ("CHANGELOG.md", r"^## \[(\d[^]]*)\] - \d{4}-\d\d-\d\d$"),
        ("deploy/Containerfile", r"^ARG VERSION=(\S+)$"),
    ]:
        m = re.search(pat, read(f), re.M)
        assert m, "%s: no version where %r expects one" % (f, pat)
        yield f, m.group(1)
    for f in sorted(os.listdir(os.path.join(REPO, "deploy", "k8s"))):
        for tag in re.findall(r"image: (?:\S+/)?sandboxd:(\S+)", read("deploy", "k8s", f)):
            yield "deploy/k8s/" + f, tag
    if os.path.exists(os.path.join(REPO, "debian", "changelog")):
        m = re.match(r"sandboxd \(([^)-]+)-\d+\)", read("debian", "changelog"))
        yield "debian/changelog", m.group(1)


def test_every_copy_of_the_version_is_versions():
    v = version()
    wrong = ["%s says %s" % (where, got) for where, got in copies() if got != v]
    assert not wrong, "VERSION is %s, but: %s" % (v, "; ".join(wrong))


def test_a_copy_that_disagrees_is_caught(monkeypatch):
    real, v = read, version()
    monkeypatch.setitem(globals(), "read", lambda *p: real(*p).replace(
        '__version__ = "%s"' % v, '__version__ = "0.0.1"'))
    wrong = [where for where, got in copies() if got != v]
    assert wrong == ["client/python/sandboxd/__init__.py"], wrong


def test_the_binaries_print_it():
    import subprocess
    bins = {"sandboxd": os.environ.get("SANDBOXD_BIN") or os.path.join(REPO, "build", "sandboxd"),
            "sandboxctl": os.environ.get("SANDBOXCTL_BIN") or os.path.join(REPO, "build", "sandboxctl")}
    p = subprocess.run([bins["sandboxd"], "--version"], capture_output=True, text=True, timeout=30)
    assert p.stdout == "sandboxd %s (protocol 1.2)\n" % version(), p.stdout
    p = subprocess.run([bins["sandboxctl"], "--version"], capture_output=True, text=True, timeout=30)
    assert p.stdout == "sandboxctl %s\n" % version(), p.stdout
