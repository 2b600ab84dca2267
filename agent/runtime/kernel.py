# execbox Python context kernel: runs cells in one namespace, like a
# notebook. Calls arrive as JSON lines on stdin ({"code", "timeout"}); each
# answer is one JSON line on fd 3. What a cell prints goes to stdout and
# stderr as it comes. At its timeout a cell is interrupted by an exception
# of its own (SIGALRM; a BaseException, so that `except Exception` does not
# swallow it), and the namespace lives on; a second later the agent sends
# SIGINT (KeyboardInterrupt) in case the first did not land.
import ast
import json
import os
import signal
import sys
import traceback

answers = os.fdopen(3, "w", encoding="utf-8")
MAX_VALUE = 1 << 20  # bytes of a value's JSON
MAX_REPR = 64 * 1024  # characters of a repr, an error message, a traceback
namespace = {"__name__": "__main__", "__builtins__": __builtins__}


running = False


class CellTimeout(BaseException):
    pass


def on_alarm(signum, frame):
    if running:
        raise CellTimeout()


signal.signal(signal.SIGALRM, on_alarm)


def idle():
    global running
    running = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def busy(timeout):
    global running
    signal.signal(signal.SIGINT, signal.default_int_handler)
    running = True
    signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))


def value_of(v):
    out = {"repr": repr(v)[:MAX_REPR], "type": type(v).__name__}
    try:
        text = json.dumps(v, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return out
    if len(text) <= MAX_VALUE:
        out["value"] = json.loads(text)
    return out


def error_of(e, interrupted):
    tb = traceback.extract_tb(e.__traceback__)
    # The kernel's own frames are not the user's business.
    tb = [f for f in tb if f.filename == "<cell>"]
    lines = traceback.format_list(tb) + traceback.format_exception_only(type(e), e)
    tb = "Traceback (most recent call last):\n" + "".join(lines)
    if len(tb) > MAX_REPR:
        tb = "…" + tb[-MAX_REPR:]  # the end says most
    err = {"type": type(e).__name__, "message": str(e)[:MAX_REPR], "traceback": tb}
    if interrupted:
        err["type"] = "TimeoutError"
        err["message"] = "the call was interrupted at its timeout"
    return err


def run(code):
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        v = eval(compile(last, "<cell>", "eval"), namespace)
        if v is not None:
            namespace["_"] = v
            return value_of(v)
    return None


idle()
for line in sys.stdin:
    req = json.loads(line)
    ans = {"ok": True}
    busy(float(req["timeout"]))
    try:
        v = run(req["code"])
        idle()
        if v is not None:
            ans.update(v)
    except (CellTimeout, KeyboardInterrupt) as e:
        ans = {"ok": False, "error": error_of(e, True), "interrupted": True}
    except SystemExit as e:
        ans = {"ok": False, "error": {"type": "SystemExit", "message": "the cell called exit(%r); the context lives on" % (e.code,)}}
    except BaseException as e:  # noqa: BLE001 - every error is the cell's answer
        ans = {"ok": False, "error": error_of(e, False)}
    finally:
        idle()
    sys.stdout.flush()
    sys.stderr.flush()
    answers.write(json.dumps(ans) + "\n")
    answers.flush()
