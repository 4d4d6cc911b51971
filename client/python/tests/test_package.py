"""The package installs without network (the in-tree build backend) and the
example agent loop runs."""

import os
import re
import subprocess
import sys
import zipfile

import pytest

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(PKG))


def test_wheel_holds_the_package(tmp_path):
    sys.path.insert(0, os.path.join(PKG, "_build"))
    try:
        import backend
    finally:
        sys.path.pop(0)
    name = backend.build_wheel(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        assert "sandboxd/__init__.py" in names and "sandboxd/aio.py" in names
        meta = "sandboxd-%s.dist-info/METADATA" % backend._project()["version"]
        assert "Requires-Python: >=3.11" in z.read(meta).decode()
    assert backend.build_sdist(str(tmp_path)).endswith(".tar.gz")


def test_pip_install_offline(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("no pip for %s" % sys.executable)
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                        "--target", str(target), PKG], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-c", "import sandboxd; print(sandboxd.__file__)"],
                       cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(target)),
                       capture_output=True, text=True)
    assert p.stdout.startswith(str(target)), p.stderr


def test_example_agent_loop(sock):
    p = subprocess.run([sys.executable, os.path.join(REPO, "examples", "python-agent.py")],
                       env=dict(os.environ, SANDBOXD_SOCKET=sock, PYTHONPATH=PKG),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "final answer: Paris is warmer by 3.5 degrees" in p.stdout


def readme_sh_lines(path):
    """The command lines of the ```sh blocks of a README (comments dropped)."""
    with open(path) as f:
        text = f.read()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def test_readme_install_commands_work(tmp_path, sock):
    """The install the READMEs give, run as written on Debian 12 (where pip
    refuses to install outside a virtual environment, PEP 668): into a venv
    under $HOME, offline; and the no-install line with PYTHONPATH."""
    if os.environ.get("SANDBOXD_SANITIZE") == "1":
        pytest.skip("no daemon involved: the normal build's run covers it")
    if subprocess.run(["/usr/bin/python3", "-c", "import ensurepip"],
                      capture_output=True).returncode != 0:
        pytest.skip("python3-venv is not installed (scripts/install-deps installs it)")
    top = readme_sh_lines(os.path.join(REPO, "README.md"))
    own = readme_sh_lines(os.path.join(PKG, "README.md"))
    venv = [x for x in top if " -m venv " in x]
    assert len(venv) == 1 and venv[0] in own, (venv, own)
    before = sorted(os.listdir(PKG))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "SANDBOXD_SOCKET": sock}
    p = subprocess.run(["/bin/sh", "-ec", venv[0]], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(os.listdir(PKG)) == before, "the install left files in client/python"
    py = os.path.join(str(tmp_path), ".venvs", "sandboxd", "bin", "python")
    p = subprocess.run([py, os.path.join(REPO, "examples", "python-agent.py")], cwd=str(tmp_path),
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "final answer: Paris is warmer by 3.5 degrees" in p.stdout
    p = subprocess.run([py, "-c", "import sandboxd; print(sandboxd.__file__)"], cwd=str(tmp_path),
                       env=env, capture_output=True, text=True)
    assert p.stdout.startswith(os.path.join(str(tmp_path), ".venvs")), p.stdout + p.stderr
    # the no-install line, as written (from the checkout)
    inplace = [x for x in top if x.startswith("PYTHONPATH=client/python ")]
    assert len(inplace) == 1, top
    p = subprocess.run(["/bin/sh", "-ec", inplace[0]], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "final answer: Paris is warmer by 3.5 degrees" in p.stdout
