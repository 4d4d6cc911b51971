"""One list of error kinds: the daemon's table (describe's error_kinds,
proto/jsonrpc.c) against the protocol's tables (docs/protocol.md section 7,
CONTRACT.md section 5 where shared/ is beside the checkout) and against every
client's own table, so that a kind added in one place fails here until every
place knows it."""
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KIND_ROW = re.compile(r"^\| `?([a-z_]+)`?(?:, `?([a-z_]+)`?)? \| (-32\d{3}) \|", re.M)


@pytest.fixture(scope="module")
def kinds(daemon):
    with daemon.client() as c:
        r = c.call("describe")
    assert r.ok, r
    k = r.result["error_kinds"]
    assert isinstance(k, dict) and len(k) >= 22, k
    return k


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


def block(text, start, end):
    """The text from the first line containing start to the next end."""
    a = text.index(start)
    return text[a:text.index(end, a)]


def table_of(text):
    """{kind: code} of a markdown table with rows | kind | code | ... (a row
    may name two kinds that share a code)."""
    out = {}
    for m in KIND_ROW.finditer(text):
        for kind in (m.group(1), m.group(2)):
            if kind:
                out[kind] = int(m.group(3))
    return out


def test_protocol_doc_lists_the_daemons_kinds(kinds):
    doc = read("docs/protocol.md")
    assert table_of(doc[doc.index("| `parse_error`") - 200:]) == kinds


def test_contract_lists_the_daemons_kinds(kinds):
    path = os.path.join(REPO, "..", "shared", "CONTRACT.md")
    if not os.path.exists(path):
        pytest.skip("no shared/CONTRACT.md beside this checkout")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert table_of(block(text, "| kind | code |", "\n\n")) == kinds


def test_python_client_knows_every_kind(kinds):
    text = read("client/python/sandboxd/errors.py")
    codes = dict((k, int(v)) for k, v in
                 re.findall(r'"([a-z_]+)": (-\d+)', block(text, "CODES", "}")))
    assert codes == kinds


def test_node_client_knows_every_kind(kinds):
    text = block(read("client/node/src/errors.js"), "const BY_KIND = {", "};")
    # and kinds of the client's own (daemon_unavailable, unsupported)
    assert set(re.findall(r"^\s+([a-z_]+):", text, re.M)) >= set(kinds)


def test_elixir_client_knows_every_kind(kinds):
    m = re.search(r"@kinds ~w\(([^)]*)\)", read("client/elixir/lib/sandboxd/error.ex"))
    assert m and set(m.group(1).split()) == set(kinds)


def test_sandboxctl_gives_every_kind_an_exit_status(kinds):
    text = block(read("client/ctl.c"), "kind_status[] = {", "};")
    assert set(re.findall(r'\{"([a-z_]+)",', text)) == set(kinds)
