"""Every block and command of this package's README, checked against the real
daemon and this package, as tests/readme does for the top README: each
fenced block and each command in backticks is claimed by a check here (or by
the test that runs it), so one added without a check fails this suite; the
signatures and names of the API it lists are the package's own."""

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import subprocess
import types

import pytest

import sandboxd

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))


def readme():
    with open(os.path.join(PKG, "README.md")) as f:
        return f.read()


def blocks():
    """[(language, body)] of the fenced blocks, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", readme(), re.S | re.M)


def run_commented(body, env):
    """Run a block in which an expression statement followed by `# VALUE`
    shows what it evaluates to; return [(line, got, want)] for each."""
    seen = []
    lines = []
    for n, line in enumerate(body.splitlines(), 1):
        m = re.match(r"^(\s*)(\S.*?)\s+# (.*)$", line)
        if m:
            try:
                compile(m.group(2), "<readme>", "eval")
                ast.literal_eval(m.group(3))
            except SyntaxError:
                pass
            else:
                line = "%s__seen.append((%d, (%s), (%s)))" % (m.group(1), n, m.group(2),
                                                             m.group(3))
        lines.append(line)
    env.update(__seen=seen)
    exec(compile("\n".join(lines), "<README>", "exec"), env)
    return seen


# ---------------------------------------------------------------- the blocks

def check_install(body, sock):
    """The venv line is run as written, offline, by
    test_package.py::test_readme_install_commands_work (it needs a few
    seconds and no daemon, so it runs there once); the no-install line is
    run here from the checkout, `...` standing for a script."""
    lines = [ln.split("  #")[0].strip() for ln in body.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    assert len(lines) == 2, lines
    with open(os.path.join(HERE, "test_package.py")) as f:
        suite = f.read()
    assert "def test_readme_install_commands_work" in suite
    assert "venv[0] in own" in suite and lines[0].startswith("python3 -m venv ")
    assert lines[1] == "PYTHONPATH=client/python python3 ...", lines[1]
    cmd = lines[1].replace("...", "-c 'import sandboxd; print(sandboxd.__file__)'")
    p = subprocess.run(["/bin/sh", "-ec", cmd], cwd=REPO, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")},
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == os.path.join(PKG, "sandboxd", "__init__.py") + "\n", p.stdout


def check_example(body, sock, monkeypatch):
    """The example, run as written with $SANDBOXD_SOCKET set: each commented
    expression has the value its comment shows."""
    monkeypatch.setenv("SANDBOXD_SOCKET", sock)
    seen = run_commented(body, {})
    assert len(seen) == 2, seen
    for n, got, want in seen:
        assert got == want, "README line %d: %r, the README shows %r" % (n, got, want)


def check_async(body, sock, monkeypatch):
    """The asyncio fragment, given the `chunks` it leaves out: every chunk
    runs on the one connection, its tool a coroutine function awaited."""
    code = body.replace('"/tmp/sbx.sock"', repr(sock))
    chunks = ["return Http.get('https://example.com/%d')" % i for i in range(4)] + ["return 7"]
    awaited = []
    src = "async def main():\n" + "".join("    " + ln + "\n" for ln in code.splitlines()) + \
        "    return results\n"
    env = {"sandboxd": sandboxd, "asyncio": asyncio, "chunks": chunks}
    exec(compile(src, "<README>", "exec"), env)
    orig = sandboxd.AsyncClient.execute

    async def execute(self, code, **kw):
        fetch = kw["tools"]["Http"]["get"]
        assert inspect.iscoroutinefunction(fetch)

        async def watched(url):
            awaited.append(url)
            return await fetch(url)
        kw["tools"] = {"Http": {"get": watched}}
        return await orig(self, code, **kw)
    monkeypatch.setattr(sandboxd.AsyncClient, "execute", execute)
    results = asyncio.run(env["main"]())
    assert [r.value for r in results] == [200] * 4 + [7]
    assert sorted(awaited) == ["https://example.com/%d" % i for i in range(4)]


def check_tool_decorator(body, sock, monkeypatch):
    """The decorated function, in a table Calc, is called as the comment
    shows, and the catalog gives its name and description."""
    env = {"sandboxd": sandboxd}
    exec(body, env)
    call = re.search(r"# Lua: (.*)$", body, re.M).group(1)
    calc = types.SimpleNamespace(get_sum=env["get_sum"])
    with sandboxd.Client(sock) as c:
        assert c.execute("return " + call, tools={"Calc": calc}).value == 3
    cat = sandboxd.catalog({"Calc": calc})
    assert 'Calc["get-sum"](a, b)' in cat and "Adds two numbers." in cat, cat


def check_stream(body, sock, monkeypatch):
    """The live output fragment, run as written with $SANDBOXD_SOCKET set:
    it prints what the chunk prints, and the commented value is the one shown."""
    monkeypatch.setenv("SANDBOXD_SOCKET", sock)
    src = "async def main():\n" + "".join("    " + ln + "\n" for ln in body.splitlines())
    env = {"sandboxd": sandboxd}
    seen = []
    lines = []
    for n, line in enumerate(src.splitlines(), 0):
        m = re.match(r"^(\s*)(\S.*?)\s+# ('.*')$", line)
        if m:
            line = "%s__seen.append((%d, (%s), (%s)))" % (m.group(1), n, m.group(2), m.group(3))
        lines.append(line)
    env["__seen"] = seen
    exec(compile("\n".join(lines), "<README>", "exec"), env)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        asyncio.run(env["main"]())
    assert out.getvalue() == "1\n2\n3\n"
    assert seen == [(5, "done", "done")], seen


def check_blocking_stream(body, sock, monkeypatch):
    """The blocking live output, run as written with $SANDBOXD_SOCKET set."""
    monkeypatch.setenv("SANDBOXD_SOCKET", sock)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        seen = run_commented(body, {"sandboxd": sandboxd})
    assert out.getvalue() == "1\n2\n3\n"
    assert [(got, want) for (_, got, want) in seen] == [("done", "done")], seen


# (language, how the block starts): its check
BLOCKS = [
    ("sh", "# into a virtual environment", check_install),
    ("python", "import sandboxd\n", check_example),
    ("python", 'async with sandboxd.AsyncClient("/tmp/sbx.sock")', check_async),
    ("python", '@sandboxd.tool(name="get-sum"', check_tool_decorator),
    ("python", "async with sandboxd.AsyncClient() as c:\n    async with c.stream(", check_stream),
    ("python", "with sandboxd.Client() as c:\n    run = c.stream(", check_blocking_stream),
]


def claim(lang, body):
    found = [c for (l, start, c) in BLOCKS if l == lang and body.startswith(start)]
    assert len(found) == 1, "no check in %s for this ```%s block:\n%s" % (__name__, lang, body)
    return found[0]


def test_every_block_has_a_check():
    bs = blocks()
    assert len(bs) == len(BLOCKS)
    for lang, body in bs:
        claim(lang, body)
    with pytest.raises(AssertionError, match="no check in"):
        claim("python", "import os\n")


@pytest.mark.parametrize("lang,start,check", BLOCKS, ids=[c.__name__ for _, _, c in BLOCKS])
def test_block(sock, monkeypatch, lang, start, check):
    [body] = [b for l, b in blocks() if l == lang and b.startswith(start)]
    params = inspect.signature(check).parameters
    check(body, sock, *([monkeypatch] if "monkeypatch" in params else []))


# ------------------------------------------------- commands in the prose

def makefile():
    with open(os.path.join(REPO, "Makefile")) as f:
        return f.read()


def make_target(cmd):
    assert re.search(r"^%s:" % re.escape(cmd.split()[1]), makefile(), re.M), cmd


def pytest_here(cmd):
    """What make test-python runs, as make expands it: this suite, under
    /usr/bin/python3."""
    out = subprocess.run(["make", "-n", "-C", REPO, "test-python"], check=True,
                         capture_output=True, text=True).stdout
    assert re.search(r"^(\S+=\S+ )*/usr/bin/python3 -m pytest .*client/python/tests$",
                     out, re.M), out


def loadgen_mode(cmd):
    """bench/python_client.py runs bench/loadgen in this mode, and loadgen
    has it."""
    mode = cmd.split()[1]
    with open(os.path.join(REPO, "bench", "python_client.py")) as f:
        assert 'loadgen("%s", ' % mode in f.read()
    with open(os.path.join(REPO, "bench", "loadgen.c")) as f:
        assert '"%s"' % mode in f.read()


COMMANDS = {
    "make test-python": make_target,
    "make test": make_target,
    "/usr/bin/python3 -m pytest": pytest_here,
    "bench/python_client.py": lambda c: os.path.isfile(os.path.join(REPO, c)),
    "bench/loadgen tools": loadgen_mode,
    "bench/loadgen latency": loadgen_mode,
}
COMMAND_RE = re.compile(r"`((?:make|/usr/bin/python3|python3|PYTHONPATH=[^\s`]+|pip|bench/[^\s`]+|"
                        r"scripts/[^\s`]+|sudo|apt-get)(?: [^`]*)?)`")


def prose_commands():
    text = re.sub(r"^```.*?^```", "", readme(), flags=re.S | re.M)
    cmds = []
    for c in COMMAND_RE.findall(text):
        c = re.sub(r"\s+", " ", c)
        if c not in cmds:
            cmds.append(c)
    return cmds


def test_every_command_in_the_prose_has_a_check():
    cmds = prose_commands()
    assert len(cmds) >= 4, cmds
    missing = [c for c in cmds if c not in COMMANDS]
    assert not missing, "no check in %s for %s" % (__name__, missing)
    for c in cmds:
        assert COMMANDS[c](c) is not False, c


# ---------------------------------------------------- the API it names

def shown_signatures(section_start, section_end):
    """`name(params)` of the README between two headings: {name: params}."""
    text = readme()
    text = text[text.index(section_start):text.index(section_end)]
    return re.findall(r"`(?:sandboxd\.|client\.)?(\w+)\(([^`]*)\)`", re.sub(r"\s+", " ", text))


def params_of(fn):
    """The parameters of fn as the README writes them: names and defaults,
    the annotations left to the package's types (which mypy checks)."""
    sig = inspect.signature(fn)
    sig = sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                      return_annotation=sig.empty)
    sig = str(sig)[1:-1]
    return re.sub(r"^self(, )?", "", sig)


def test_client_signatures_are_the_packages():
    """The Clients section: each call shown, with the parameters it shows,
    on Client and AsyncClient (only AsyncClient for what its row says is
    `AsyncClient` only)."""
    shown = shown_signatures("## Clients", "- `limits` takes")
    names = [n for n, _ in shown]
    assert names[:2] == ["Client", "AsyncClient"] and len(names) >= 12, names
    text = re.sub(r"\s+", " ", readme())
    for name, params in shown:
        if name in ("Client", "AsyncClient"):
            assert params_of(getattr(sandboxd, name).__init__) == params, name
            continue
        async_only = re.search(r"\| `%s\([^`]*\)` \| `AsyncClient` only" % name, text)
        if async_only:
            assert not hasattr(sandboxd.Client, name), name
            assert callable(getattr(sandboxd.AsyncSession, name)), name
        for cls in (sandboxd.AsyncClient,) if async_only else (sandboxd.Client,
                                                                sandboxd.AsyncClient):
            assert hasattr(cls, name), "%s has no %s" % (cls.__name__, name)
            assert params_of(getattr(cls, name)) == params, (cls.__name__, name)


def test_result_and_error_attributes_exist():
    text = re.sub(r"\s+", " ", readme())
    shown = re.search(r"`Result`: ((?:`\.\w+`(?:, )?)+)", text).group(1)
    fields = re.findall(r"`\.(\w+)`", shown)
    assert len(fields) == 6, fields
    r = sandboxd.Result()
    for f in fields:
        assert hasattr(r, f), f
    shown = re.search(r"`sandboxd\.SandboxdError` with ((?:`\.\w+`[,.]? )+)", text).group(1)
    attrs = re.findall(r"`\.(\w+)`", shown)
    assert len(attrs) == 10, attrs
    e = sandboxd.LuaError("m", kind="runtime_error", code=-32002, data={})
    for a in attrs:
        getattr(e, a)


def test_session_and_render_signatures_are_the_packages():
    [(_, params)] = [s for s in shown_signatures("## Sessions", "- **daemon sessions**")
                     if s[0] == "execute"]
    for cls in (sandboxd.Session, sandboxd.AsyncSession):
        assert params_of(cls.execute) == params, cls
        assert callable(cls.snapshot) and callable(cls.close)
    shown = dict(shown_signatures("## For the model", "## Errors"))
    assert params_of(sandboxd.render) == shown["render"], params_of(sandboxd.render)
    assert params_of(sandboxd.system_prompt).startswith(shown["system_prompt"]), \
        params_of(sandboxd.system_prompt)
    assert callable(sandboxd.catalog) and callable(sandboxd.to_jsonable)
    assert callable(sandboxd.Table) and callable(sandboxd.tool)


def test_error_table_is_the_packages():
    """Each row: the class exists, and every kind it lists maps to it."""
    from sandboxd import errors
    text = readme()
    table = text[text.index("| class | kinds |"):text.index("## Tests and benchmark")]
    rows = [ln.split(" | ") for ln in table.splitlines()[2:] if ln.startswith("| `")]
    assert len(rows) >= 10
    for cls_cell, kinds_cell in rows:
        name = re.match(r"\| `(\w+)`", cls_cell).group(1)
        cls = getattr(sandboxd, name)
        assert issubclass(cls, sandboxd.SandboxdError), name
        for kind in re.findall(r"^`(\w+)`|, `(\w+)`", kinds_cell):
            kind = kind[0] or kind[1]
            assert errors.class_for(kind) is cls, (kind, name)
