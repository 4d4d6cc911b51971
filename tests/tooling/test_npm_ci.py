"""scripts/npm-ci, how the Makefiles install the Node packages: when the
registry cannot be used, its last line names the problem (unreachable, a
certificate npm does not trust) besides npm's own error."""
import json
import os
import socket
import ssl
import subprocess
import threading

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_CI = os.path.join(REPO, "scripts", "npm-ci")

pytestmark = pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v npm"],
                                               capture_output=True).returncode != 0,
                                reason="no npm here")


@pytest.fixture
def project(tmp_path):
    """A package with one locked dependency and an empty npm cache, so that
    npm ci has to fetch it from the registry."""
    d = tmp_path / "p"
    d.mkdir()
    (d / "package.json").write_text(json.dumps(
        {"name": "p", "version": "1.0.0", "dependencies": {"left-pad": "1.3.0"}}))
    (d / "package-lock.json").write_text(json.dumps({
        "name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
        "packages": {
            "": {"name": "p", "version": "1.0.0", "dependencies": {"left-pad": "1.3.0"}},
            "node_modules/left-pad": {
                "version": "1.3.0",
                "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
                "integrity": "sha512-XI5MPzVNApjAyhQzphX8BkmKsKUxD4LdyK24iZeQEn1KYvL+jLmDLz6vo6BsIhE4"
                             "ndOTb8+ZVu5V5ZgbrTKCOg=="}}}))
    return d


def npm_ci(project, registry, **env):
    e = dict(os.environ, npm_config_registry=registry, npm_config_fetch_retries="0",
             npm_config_cache=str(project.parent / "cache"), **env)
    for k in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
              "npm_config_proxy", "npm_config_https_proxy"):
        e.pop(k, None)
    p = subprocess.run([NPM_CI, str(project)], capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stderr.strip().splitlines()[-1]


def test_an_unreachable_registry_is_named(project):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))              # a port nobody listens on
    port = s.getsockname()[1]
    s.close()
    registry = "http://127.0.0.1:%d/" % port
    rc, last = npm_ci(project, registry)
    assert rc != 0
    assert last.startswith("npm-ci: npm ci in %s failed: cannot reach %s" % (project, registry)), last
    assert "make test needs the npm registry" in last


def test_a_certificate_npm_does_not_trust_is_named(project, tmp_path):
    """A registry (or a TLS-intercepting proxy) whose certificate is self-signed."""
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(crt), str(key))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(60)

    def serve():
        try:
            while True:
                c, _ = srv.accept()
                try:
                    ctx.wrap_socket(c, server_side=True).close()
                except (ssl.SSLError, OSError):
                    c.close()
        except OSError:
            pass
    threading.Thread(target=serve, daemon=True).start()
    try:
        registry = "https://127.0.0.1:%d/" % srv.getsockname()[1]
        rc, last = npm_ci(project, registry)
    finally:
        srv.close()
    assert rc != 0
    assert "npm does not trust the certificate %s presents" % registry in last, last
