"""The client's build backend (PEP 517, in-tree, standard library only).

The client is pure Python with no dependencies, and execbox's users often
install it where no package index is reachable. A stock ``python3 -m venv``
has pip and setuptools but not wheel, and setuptools then cannot build a
wheel offline; this backend needs nothing, so ``pip install
./clients/python`` works there with or without build isolation.

It reads the name, version, summary and requires-python from
pyproject.toml's [project] table (plain ``key = "string"`` lines) and packs
the ``execbox`` package.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "execbox"


def _project():
    """The [project] table's string values."""
    out, section = {}, None
    with open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[project]":
                m = re.match(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"$', line)
                if m:
                    out[m.group(1)] = m.group(2)
    for key in ("name", "version"):
        if key not in out:
            raise ValueError("pyproject.toml: [project] has no %s" % key)
    return out


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if "description" in p:
        lines.append("Summary: " + p["description"])
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    return "\n".join(lines) + "\n"


def _sources():
    """The package's files, relative to the project root, sorted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(_ROOT, _PACKAGE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(d, f), _ROOT).replace(os.sep, "/"))
    return out


def _wheel(wheel_directory, files):
    """Writes a py3-none-any wheel holding files ({archive name: bytes})."""
    p = _project()
    dist = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    info = dist + ".dist-info/"
    files = dict(files)
    files[info + "METADATA"] = _metadata(p).encode()
    files[info + "WHEEL"] = b"Wheel-Version: 1.0\nGenerator: execbox-build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "RECORD,,")
    files[info + "RECORD"] = ("\n".join(record) + "\n").encode()
    name = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            z.writestr(zipfile.ZipInfo(arc, (1980, 1, 1, 0, 0, 0)), data)
    return name


def _read(rel):
    with open(os.path.join(_ROOT, rel), "rb") as f:
        return f.read()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {rel: _read(rel) for rel in _sources()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth puts this source tree on sys.path (pip install -e)."""
    return _wheel(wheel_directory, {_PACKAGE + "_editable.pth": (_ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    name = base + ".tar.gz"
    rels = ["pyproject.toml", "README.md", "_build/backend.py"] + _sources()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in rels:
            data = _read(rel)
            ti = tarfile.TarInfo(base + "/" + rel)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
        pkg = _metadata(p).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size, ti.mode = len(pkg), 0o644
        t.addfile(ti, io.BytesIO(pkg))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
