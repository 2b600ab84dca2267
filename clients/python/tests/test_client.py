import asyncio
import os

import pytest

from execbox import AsyncClient, Client, CodeResult, ExecboxError
from conftest import TOKEN


@pytest.fixture
def c(server):
    return Client(server, token=TOKEN)


def test_run_command(c):
    r = c.run(["sh", "-c", "echo hi; echo err >&2; exit 3"])
    assert (r.exit_code, r.reason, r.stdout, r.stderr, r.backend) == (3, "exited", "hi\n", "err\n", "local")
    assert not r.ok and r.usage.wall_ns > 0 and r.enforcement == {}


def test_run_code_files_stdin_explain(c):
    r = c.run(code="import sys\nprint(open('in.txt').read() + sys.stdin.read())", files={"in.txt": b"from a file, "},
              stdin="from stdin", explain=True)
    assert r.ok and r.stdout == "from a file, from stdin\n"
    assert r.enforcement.get("wall")


def test_run_bytes_that_are_not_text(c):
    r = c.run(["sh", "-c", r"printf '\377\376'"])
    assert r.stdout == "" and r.stdout_bytes == b"\xff\xfe"


def test_timeout_is_a_result(c):
    r = c.run(["sleep", "5"], limits={"wall": "300ms"})
    assert r.reason == "timeout" and r.exit_code != 0


def test_stream(c):
    events = list(c.run_stream(command=["sh", "-c", "echo one; echo two >&2; echo three"]))
    out = b"".join(e.data for e in events if e.type == "stdout")
    err = b"".join(e.data for e in events if e.type == "stderr")
    assert (out, err) == (b"one\nthree\n", b"two\n")
    assert events[-1].type == "result" and events[-1].result.ok


def test_execute(c):
    r = c.execute("def main(a, b):\n    print('adding')\n    return a + b\n", {"a": 2, "b": 40})
    assert r.ok and r.data == 42 and r.stdout == "adding\n" and r.backend == "local"
    r = c.execute("def main():\n    return 1 / 0\n")
    assert not r.ok and r.code == "user_error" and r.type == "ZeroDivisionError" and "main" in r.traceback


def test_lint(c):
    assert c.lint("def f():\n    return 1\n") == []
    d = c.lint("def f(:\n    pass\n")
    assert d and d[0].line == 1 and d[0].message


def test_errors_carry_the_code(server, c):
    with pytest.raises(ExecboxError) as e:
        Client(server, token="wrong").run(["true"])
    assert e.value.code == "unauthenticated" and e.value.status == 401
    with pytest.raises(ExecboxError) as e:
        c.run(["true"], limits={"memory": "lots"})
    assert e.value.code == "invalid_request" and e.value.status == 400 and e.value.field == "limits.memory"
    with pytest.raises(ExecboxError) as e:
        c.run(["true"], min_isolation="vm")
    assert e.value.code == "isolation_too_weak" and e.value.status == 403
    with pytest.raises(ExecboxError) as e:
        Client("http://127.0.0.1:9").run(["true"])
    assert e.value.code == "server_unreachable" and e.value.status == 0
    with pytest.raises(ExecboxError) as e:
        c.run("echo no shell strings")
    assert e.value.code == "request_invalid"


def test_client_reads_the_environment(server, monkeypatch):
    # As the CLI: EXECBOX_URL and EXECBOX_TOKEN name the server and the token.
    monkeypatch.setenv("EXECBOX_URL", server)
    monkeypatch.setenv("EXECBOX_TOKEN", TOKEN)
    assert Client().run(["true"]).exit_code == 0
    monkeypatch.setenv("EXECBOX_TOKEN", "wrong")
    with pytest.raises(ExecboxError) as e:
        Client().run(["true"])
    assert e.value.code == "unauthenticated"
    assert Client(token=TOKEN).run(["true"]).exit_code == 0  # an argument wins


def test_health(c):
    # The server runs on local, named: the report says so, and lists local
    # as ready and allowed although unisolated.
    h = c.health()
    assert (h["configured"], h["backend"], h["isolation"]) == ("local", "local", "none"), h
    local = [b for b in h["candidates"] if b["name"] == "local"]
    assert len(local) == 1, h["candidates"]
    assert (local[0]["available"], local[0]["ready"], local[0].get("unisolated"), local[0]["allowed"]) == (True, True, True, True), local


def test_async(server):
    async def go():
        c = AsyncClient(server, token=TOKEN)
        rs = await asyncio.gather(*(c.run(code="print(%d)" % i) for i in range(4)))
        assert [r.stdout for r in rs] == ["%d\n" % i for i in range(4)]
        assert (await c.execute("def main(x):\n    return x * 2\n", {"x": 21})).data == 42
        chunks = [e async for e in c.run_stream(command=["echo", "streamed"])]
        assert chunks[-1].result.stdout == "streamed\n"
    asyncio.run(go())


def test_session(c):
    import hashlib
    import io
    with c.create_session(labels={"t": "py"}, idle_timeout=120) as s:
        assert s.info["backend"] == "local" and s.info["labels"] == {"t": "py"}
        for i in (1, 2, 3):
            r = s.exec(["sh", "-c", "echo x >> n; wc -l < n"])
            assert r.ok and r.stdout.strip() == str(i)
        assert s.exec(code="print(open('n').read().count('x'))").stdout == "3\n"
        assert s.exec(["cat"], stdin="hi").stdout == "hi"
        assert s.exec(["cat"], stdin=b"\xff").stdout_bytes == b"\xff"
        blob = bytes(range(256)) * (5 * 4096)  # 5 MiB, over the JSON body bound
        info = s.put_file("d/blob.bin", io.BytesIO(blob))
        assert info["size"] == len(blob) and info["type"] == "file"
        out = io.BytesIO()
        assert s.get_file("d/blob.bin", out) is None
        assert hashlib.sha256(out.getvalue()).digest() == hashlib.sha256(blob).digest()
        s.put_file("d/t.txt", "text")
        assert s.get_file("d/t.txt") == b"text"
        assert [e["path"] for e in s.list("d")] == ["d/blob.bin", "d/t.txt"]
        assert s.stat("d")["type"] == "dir" and s.stat()["type"] == "dir"
        up = s.upload({"a.txt": "alpha", "sub/b.bin": io.BytesIO(blob), 'q"uote': b"q"}, dir="u")
        assert [(e["path"], e["size"]) for e in up] == [("u/a.txt", 5), ("u/sub/b.bin", len(blob)), ('u/q"uote', 1)]
        assert s.get_file("u/sub/b.bin") == blob and s.get_file('u/q"uote') == b"q"
        assert [e["path"] for e in s.upload([("top.txt", "t")])] == ["top.txt"]
        with pytest.raises(ExecboxError) as e:
            s.upload({"../x": "x"})
        assert e.value.code == "path_invalid"
        s.mkdir("e/f")
        s.remove("d")
        with pytest.raises(ExecboxError) as e:
            s.stat("d")
        assert e.value.code == "file_not_found"
        with pytest.raises(ExecboxError) as e:
            s.get_file("../x")
        assert e.value.code == "path_invalid"
        assert s.id in [x["id"] for x in c.sessions()]
        assert c.session(s.id).refresh()["execs"] >= 5
        # Contexts: state kept across calls, the last expression's value.
        s.run_code("import math\nr = 2\ndef area(x):\n    return math.pi * x * x")
        out = s.run_code("print('hi')\n{'a': round(area(r), 2)}")
        assert isinstance(out, CodeResult) and out.ok and out.value == {"a": 12.57} and out.stdout == "hi\n"
        assert out.type == "dict" and out.repr == "{'a': 12.57}" and out.error is None and out.duration_ms > 0
        err = s.run_code("1/0")
        assert not err.ok and err.error.type == "ZeroDivisionError" and err.context == out.context
        assert "division by zero" in err.error.message and "Traceback" in err.error.traceback
        loop = s.run_code("while True:\n    r += 0", timeout=1)
        assert loop.interrupted and s.run_code("r").value == 2
        assert [x["id"] for x in s.contexts()] == [out.context]
        s.reset_context(out.context)
        assert s.run_code("'r' in dir()").value is False
        s.delete_context(out.context)
        assert s.contexts() == [] and s.run_code("7 * 6").value == 42
    s.close()  # closing a closed session succeeds
    with pytest.raises(ExecboxError) as e:
        s.exec(["true"])
    assert e.value.code == "session_closed" and e.value.status == 404


@pytest.mark.skipif(os.geteuid() != 0, reason="tools run in an isolating backend: native needs root")
def test_tools(c):
    names = {t["name"]: t["source"] for t in c.tools(backend="native")["tools"]}
    assert names == {"python": "builtin", "read_file": "builtin", "write_file": "builtin", "http_fetch": "builtin"}
    r = c.run_tool("python", {"code": "x = 6\nx * 7"}, backend="native")
    assert r["ok"] and r["result"]["value"] == 42 and r["backend"] == "native"
    r = c.run_tool("read_file", {"path": "a.txt"}, files={"a.txt": b"hi"}, backend="native")
    assert r["ok"] and r["result"]["content"] == "hi"
    r = c.run_tool("http_fetch", {"url": "http://127.0.0.1:9/"}, backend="native")
    assert not r["ok"] and r["error"]["code"] == "network_disabled"
    with pytest.raises(ExecboxError) as e:
        c.run_tool("python", {"code": 3}, backend="native")
    assert e.value.code == "tool_args_invalid" and e.value.status == 400
    # The local backend mounts no tools dir: refused, never run without it.
    with pytest.raises(ExecboxError) as e:
        c.run_tool("python", {"code": "1"})
    assert e.value.code == "mounts_unsupported"
    assert c.approvals() == []
    with pytest.raises(ExecboxError) as e:
        c.decide("0" * 32, True)
    assert e.value.code == "approval_not_found" and e.value.status == 404
