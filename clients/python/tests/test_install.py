"""The README's install command, exactly, in a stock venv."""

import os
import pathlib
import subprocess
import sys

CLIENT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_install_in_a_stock_venv(tmp_path):
    # A venv as `python3 -m venv` makes it (pip and setuptools, no wheel),
    # from the interpreter this one was made from.
    base = pathlib.Path(sys.base_prefix) / "bin" / "python3"
    venv = tmp_path / "venv"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True)
    # No package index is reachable: any use of one fails at once. The
    # venv's python sees only what it installed (no PYTHONPATH).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env.update(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    readme = (CLIENT / "README.md").read_text()
    assert "    pip install ./clients/python\n" in readme
    out = subprocess.run([str(venv / "bin" / "pip"), "install", "./clients/python"], cwd=CLIENT.parents[1], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    probe = "import execbox, sys; print(execbox.__file__); print(execbox.CodeResult.__name__)"
    got = subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    where, name = got.stdout.split()
    assert where.startswith(str(venv)) and name == "CodeResult"
