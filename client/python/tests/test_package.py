"""The package installs without network (the in-tree build backend) and the
example agent loop runs."""

import os
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
        assert "Requires-Python: >=3.11" in z.read("sandboxd-0.1.0.dist-info/METADATA").decode()
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
