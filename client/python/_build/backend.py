"""A PEP 517 build backend for the sandboxd package, kept in the tree so that
`pip install ./client/python` needs no network (pip would otherwise download
setuptools into its isolated build environment).  It builds a pure-Python
wheel of sandboxd/ (and an editable wheel, and an sdist) from the metadata
in pyproject.toml, with the standard library only.
"""

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"],
             "Summary: %s" % p.get("description", ""),
             "Requires-Python: %s" % p.get("requires-python", ">=3.11")]
    lines += ["License: %s" % p["license"]["text"]] if "license" in p else []
    lines += ["Classifier: %s" % c for c in p.get("classifiers", [])]
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist(p):
    return "%s-%s" % (p["name"].replace("-", "_"), p["version"])


def _files():
    pkg = os.path.join(ROOT, "sandboxd")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            yield "sandboxd/" + name, os.path.join(pkg, name)


def _legal():
    """LICENSE and NOTICE, where the package's directory has them (the
    release's copy of it does: scripts/dist)."""
    for name in ("LICENSE", "NOTICE"):
        if os.path.exists(os.path.join(ROOT, name)):
            yield name, os.path.join(ROOT, name)


def _wheel(directory, entries):
    p = _project()
    dist = _dist(p)
    name = dist + "-py3-none-any.whl"
    info = dist + ".dist-info/"
    entries = list(entries) + [(info + n, _read(path)) for n, path in _legal()] + [
        (info + "METADATA", _metadata().encode("utf-8")),
        (info + "WHEEL", b"Wheel-Version: 1.0\nGenerator: sandboxd-backend\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (arc, digest.decode(), len(data)))
        record.append(info + "RECORD,,")
        z.writestr(info + "RECORD", "\n".join(record) + "\n")
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, ((arc, _read(path)) for arc, path in _files()))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [("sandboxd_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    dist = _dist(_project())
    name = dist + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in (["pyproject.toml", "README.md", "LICENSE", "NOTICE", "_build/backend.py"] +
                    [a for a, _ in _files()]):
            if os.path.exists(os.path.join(ROOT, rel)):
                t.add(os.path.join(ROOT, rel), arcname=dist + "/" + rel)
        pkg = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size = len(pkg)
        t.addfile(ti, io.BytesIO(pkg))
    return name
