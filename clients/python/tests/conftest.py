"""A real `execbox serve` for the tests: the binary EXECBOX_BINARY names,
else one built from this checkout with go build."""

import json
import os
import pathlib
import subprocess
import tempfile
import threading

import pytest

TOKEN = "py-client-secret"
ROOT = pathlib.Path(__file__).resolve().parents[3]


def _binary(tmp: str) -> str:
    b = os.environ.get("EXECBOX_BINARY")
    if b:
        return b
    out = os.path.join(tmp, "execbox")
    subprocess.run(["go", "build", "-o", out, "./cmd/execbox"], cwd=ROOT, check=True)
    return out


@pytest.fixture(scope="session")
def server():
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXECBOX_")}
        env.update({"EXECBOX_ALLOW_UNISOLATED": "true", "EXECBOX_BACKEND": "local", "EXECBOX_TOKEN": TOKEN,
                    "EXECBOX_LOG_FORMAT": "json", "EXECBOX_WORK_ROOT": os.path.join(tmp, "work"),
                    "EXECBOX_AUDIT_PATH": os.path.join(tmp, "audit.db")})
        p = subprocess.Popen([_binary(tmp), "serve", "--listen", "127.0.0.1:0"], env=env,
                             stderr=subprocess.PIPE, text=True)
        addr = None
        for line in p.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "listening":
                addr = rec["addr"]
                break
        if addr is None:
            p.kill()
            raise RuntimeError("execbox serve did not start")
        # Keep reading its log so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
        try:
            yield "http://" + addr
        finally:
            p.terminate()
            p.wait(timeout=30)
