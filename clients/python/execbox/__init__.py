"""Client for the execbox HTTP API (stdlib only).

    from execbox import Client
    c = Client("http://127.0.0.1:8080", token="...")
    res = c.run(code="print(6 * 7)")          # RunResult(exit_code=0, stdout="42\\n", ...)
    resp = c.execute("def main(a, b):\\n    return a + b", {"a": 2, "b": 40})   # resp.data == 42
    for ev in c.run_stream(command=["sh", "-c", "echo a; echo b"]): ...
    with c.create_session() as s:             # a sandbox that keeps its files across execs
        s.put_file("in.txt", b"hi"); s.exec(["cat", "in.txt"]); s.get_file("in.txt")

Every failure the server answers is an ExecboxError carrying its stable
code (``err.code``); AsyncClient offers the same methods for asyncio.
"""

from .client import AsyncClient, Client
from .errors import ExecboxError
from .session import Session
from .types import CodeError, CodeResult, Diagnostic, FunctionResponse, RunResult, StreamEvent, Usage

__all__ = ["AsyncClient", "Client", "CodeError", "CodeResult", "Diagnostic", "ExecboxError", "FunctionResponse", "RunResult", "Session", "StreamEvent", "Usage"]
