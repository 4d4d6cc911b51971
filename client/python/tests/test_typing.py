"""The package's annotations, checked: `mypy --strict` passes on the package
and on every Python example of its README (each made a module as the
README's own checks run it), and fails on a misuse of the API, so the
examples are checked against the package's types and not against Any."""

import os
import subprocess

import pytest

import test_readme

PKG = test_readme.PKG

# How each README block becomes a module mypy can check: the fragments that
# run inside a coroutine are put in one, given what they leave out.
WRAP = {
    "check_example": "{body}",
    "check_async": "import asyncio\nimport sandboxd\n\n\n"
                   "async def main(chunks: list[str]) -> list[sandboxd.Result]:\n"
                   "{indented}    return results\n",
    "check_tool_decorator": "import sandboxd\n\n\n{body}",
    "check_stream": "import sandboxd\n\n\nasync def main() -> None:\n{indented}",
    "check_blocking_stream": "import sandboxd\n\n{body}",
}

MISUSE = """import sandboxd


def f(c: sandboxd.Client) -> str:
    r = c.execute("return 1", timeout_ms="soon")
    return r.stats["tool_calls"]
"""


def mypy(*args):
    try:
        return subprocess.run(["/usr/bin/python3", "-m", "mypy", "--strict", "--no-incremental",
                               *args], cwd=PKG, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, MYPYPATH=PKG))
    except FileNotFoundError:
        pytest.fail("no /usr/bin/python3")


def examples(tmp_path):
    paths = []
    for lang, body in test_readme.blocks():
        if lang != "python":
            continue
        check = test_readme.claim(lang, body)
        indented = "".join("    " + ln + "\n" for ln in body.splitlines())
        p = tmp_path / ("readme_%s.py" % check.__name__)
        p.write_text(WRAP[check.__name__].format(body=body, indented=indented))
        paths.append(str(p))
    return paths


def test_mypy_strict_on_the_package_and_the_readme(tmp_path):
    paths = examples(tmp_path)
    assert len(paths) == len(WRAP)
    p = mypy("--cache-dir", str(tmp_path / "cache"), "sandboxd", *paths)
    if "No module named mypy" in p.stderr:
        pytest.fail("mypy is missing: scripts/install-deps installs python3-mypy")
    assert p.returncode == 0, p.stdout + p.stderr
    modules = [n for n in os.listdir(os.path.join(PKG, "sandboxd")) if n.endswith(".py")]
    assert "Success: no issues found in %d source files" % (len(paths) + len(modules)) \
        in p.stdout, p.stdout


def test_mypy_sees_a_misuse(tmp_path):
    bad = tmp_path / "misuse.py"
    bad.write_text(MISUSE)
    p = mypy("--cache-dir", str(tmp_path / "cache"), str(bad))
    assert p.returncode == 1, p.stdout + p.stderr
    assert 'Argument "timeout_ms" to "execute" of "Client" has incompatible type' in p.stdout
    assert 'Incompatible return value type (got "int", expected "str")' in p.stdout


def test_the_wheel_says_it_is_typed(tmp_path):
    import sys
    import zipfile
    sys.path.insert(0, os.path.join(PKG, "_build"))
    try:
        import backend
    finally:
        sys.path.pop(0)
    with zipfile.ZipFile(tmp_path / backend.build_wheel(str(tmp_path))) as z:
        assert "sandboxd/py.typed" in z.namelist()
