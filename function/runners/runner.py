# execbox function runner for Python. It reaches the interpreter as
# `python3 -I -B -c <bootstrap>` (no script file); the request arrives on
# stdin; the response is the only thing written to the original stdout,
# which is moved to a private fd before any user code runs. Fds 1 and 2 then
# point at a pipe drained into a capped buffer, so prints and raw writes of
# the function (and of its child processes) never reach the protocol.
import io
import json
import os
import sys
import threading
from collections.abc import Awaitable

MAX_INPUT = 131072
MAX_RESULT = 262144
MAX_STDOUT = 8192
MAX_ERROR = 4096
MAX_TRACEBACK = 16384
FILENAME = "function.py"
MODULE_NAME = "execbox_function"

_dumps = json.dumps
_loads = json.loads
_write = os.write
_exit = os._exit


class Failure(Exception):
    def __init__(self, code, message, type_=""):
        super().__init__(message)
        self.code, self.message, self.type = code, message, type_


class Capture:
    """Fds 1 and 2 → a pipe; a thread keeps the first MAX_STDOUT bytes."""

    def __init__(self):
        r, w = os.pipe()
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        self.kept = bytearray()
        self.total = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._drain, args=(r,), daemon=True)
        self.thread.start()
        for name in ("stdout", "stderr"):
            fd = 1 if name == "stdout" else 2
            stream = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=True)
            setattr(sys, name, stream)

    def _drain(self, r):
        while True:
            try:
                chunk = os.read(r, 65536)
            except OSError:
                break
            if not chunk:
                break
            with self.lock:
                self.total += len(chunk)
                room = MAX_STDOUT - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
        os.close(r)

    def finish(self):
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        # A background child of the function may still hold the pipe; do not wait for it.
        self.thread.join(0.25)
        with self.lock:
            return bytes(self.kept).decode("utf-8", "replace"), self.total > MAX_STDOUT


def utf16_column(line, col):
    return len(line[:max(col, 0)].encode("utf-16-le")) // 2


def diagnostic(code, err):
    """A SyntaxError as an editor diagnostic: lines 1-based, columns 0-based UTF-16."""
    import re
    lines = re.split(r"\r\n|\r|\n", code)
    line = max(err.lineno or 1, 1)
    col = max((err.offset or 1) - 1, 0)
    end_line = err.end_lineno or line
    end_col = (err.end_offset or 0) - 1
    if end_line < line or end_col < 0 or (end_line == line and end_col < col):
        end_line, end_col = line, col
    text = lines[line - 1] if line <= len(lines) else ""
    end_text = lines[end_line - 1] if end_line <= len(lines) else ""
    col, end_col = utf16_column(text, col), utf16_column(end_text, end_col)
    if end_line == line and end_col <= col:
        end_col = col + 1
    return {"line": line, "column": col, "endLine": end_line, "endColumn": end_col,
            "message": err.msg or "invalid syntax", "type": "error"}


def compile_code(code):
    return compile(code, FILENAME, "exec", dont_inherit=True)


def lint(code):
    try:
        compile_code(code)
    except SyntaxError as err:
        return [diagnostic(code, err)]
    except ValueError as err:  # e.g. NUL bytes
        return [{"line": 1, "column": 0, "endLine": 1, "endColumn": 1, "message": str(err), "type": "error"}]
    return []


def last_function(code):
    import ast
    names = [n.name for n in ast.parse(code, FILENAME).body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return names[-1] if names else ""


def user_traceback(err, code):
    import linecache
    import traceback
    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == FILENAME]
    text = "".join(traceback.format_list(frames))
    head = "Traceback (most recent call last):\n" if frames else ""
    tail = "".join(traceback.format_exception_only(type(err), err))
    return (head + text + tail)[-MAX_TRACEBACK:]


def encode_result(value):
    def reject(obj):
        raise TypeError("result contains a value of type %s, which is not JSON serialisable"
                        % type(obj).__qualname__)
    try:
        text = _dumps(value, ensure_ascii=False, allow_nan=False, default=reject, separators=(",", ":"))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: escape them
            data = _dumps(value, ensure_ascii=True, allow_nan=False, default=reject,
                          separators=(",", ":")).encode()
    except ValueError as err:
        msg = str(err)
        if "Out of range float" in msg:
            msg = "result contains NaN or Infinity, which strict JSON does not allow"
        raise Failure("result_invalid", "result is not valid JSON: " + msg) from None
    except (TypeError, RecursionError) as err:
        raise Failure("result_invalid", "result is not valid JSON: " + str(err)) from None
    if len(data) > MAX_RESULT:
        raise Failure("result_too_large", "result exceeds 256 KiB")
    return data


def call(request):
    code = request["code"]
    try:
        code_obj = compile_code(code)
    except (SyntaxError, ValueError) as err:
        raise Failure("syntax_error", str(err), type(err).__name__) from None
    entry = request.get("entrypoint") or ""
    params = request.get("params") or {}
    namespace = {"__name__": MODULE_NAME, "__builtins__": __builtins__}
    exec(code_obj, namespace, namespace)
    if not entry:
        entry = last_function(code)
        if not entry:
            raise Failure("entrypoint_not_found", "code defines no top-level function to call")
    fn = namespace.get(entry)
    if fn is None:
        raise Failure("entrypoint_not_found", "entrypoint %s is not defined in the code" % _dumps(entry, ensure_ascii=False))
    if not callable(fn):
        raise Failure("entrypoint_not_found", "entrypoint %s is not a function" % _dumps(entry, ensure_ascii=False))
    result = fn(**params)
    if isinstance(result, Awaitable):
        import asyncio

        async def wait(aw):
            return await aw
        result = asyncio.run(wait(result))
    return encode_result(result)


def respond(fd, fields, data=None):
    parts = []
    for k, v in fields.items():
        # ASCII-escaped, so lone surrogates in a message stay valid JSON.
        parts.append(_dumps(k) + ":" + _dumps(v, ensure_ascii=True, separators=(",", ":")))
    if data is not None:
        parts.insert(1, '"data":' + data.decode("utf-8"))
    out = ("{" + ",".join(parts) + "}\n").encode("utf-8")
    with io.FileIO(fd, "w", closefd=False) as f:
        view = memoryview(out)
        while view:
            view = view[f.write(view):]


def prewarm():
    """Waiting for the call (a warm pool started us before it came): import
    now what a call may need, so that it does not wait for that later."""
    import select
    try:
        waiting = not select.select([0], [], [], 0)[0]
    except (OSError, ValueError):
        return
    if waiting:
        import ast  # noqa: F401  last_function
        import linecache  # noqa: F401  user_traceback
        import traceback  # noqa: F401


def main():
    protocol = os.dup(1)  # non-inheritable: the function's children never get it
    # Ready before the request, so that a warm runner has it waiting.
    capture = Capture()
    prewarm()
    raw = sys.stdin.buffer.read(MAX_INPUT + 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if len(raw) > MAX_INPUT:
        respond(protocol, {"ok": False, "code": "input_too_large", "error": "function input exceeds 128 KiB"})
        return
    request = _loads(raw)
    if request.get("mode") == "lint":
        diags = lint(request["code"])
        respond(protocol, {"ok": True, "diagnostics": diags})
        return
    fields, data = {"ok": True}, None
    try:
        data = call(request)
    except Failure as f:
        fields = {"ok": False, "code": f.code, "error": f.message[:MAX_ERROR]}
        if f.type:
            fields["type"] = f.type
    except BaseException as err:
        fields = {"ok": False, "code": "user_error", "error": (str(err) or type(err).__name__)[:MAX_ERROR],
                  "type": type(err).__name__, "traceback": user_traceback(err, request["code"])}
    stdout, truncated = capture.finish()
    fields["stdout"] = stdout
    fields["stdout_truncated"] = truncated
    respond(protocol, fields, data)


_diag = os.dup(2)  # the runner's own failures, never mixed with the function's output
try:
    main()
except BaseException:
    import traceback
    _write(_diag, ("execbox runner: " + traceback.format_exc()).encode("utf-8", "replace"))
    _exit(70)
_exit(0)
