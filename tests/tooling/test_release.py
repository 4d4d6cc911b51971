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
