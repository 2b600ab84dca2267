# Built-in tool: run Python code REPL-style. Each call is a fresh
# interpreter: nothing is kept between calls.
import ast
import builtins
import contextlib
import json
import linecache

SPEC = {
    "name": "python",
    "description": "Run Python code in a fresh interpreter, REPL-style: the value of the last "
                   "expression is returned as value (when JSON can hold it), repr (its printed form) "
                   "and type, with what the code printed. Nothing is kept between calls.",
    "parameters": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source to run", "maxLength": 262144}},
        "required": ["code"],
        "additionalProperties": False,
    },
}

FILENAME = "<python>"
MAX_STDOUT = 65536
MAX_VALUE = 262144


class Bounded:
    """A text sink that keeps the first MAX_STDOUT characters."""

    def __init__(self):
        self.parts, self.size, self.truncated = [], 0, False

    def write(self, s):
        room = MAX_STDOUT - self.size
        if len(s) > room:
            self.truncated = True
            s = s[:max(room, 0)]
        self.parts.append(s)
        self.size += len(s)
        return len(s)

    def flush(self):
        pass

    def text(self):
        return "".join(self.parts)


def execute(args, ctx):
    code = args["code"]
    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    tree = ast.parse(code, FILENAME, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    out = Bounded()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, FILENAME, "exec"), namespace)
        value = eval(compile(last, FILENAME, "eval"), namespace) if last is not None else None
    # The shape of a context call's value (agent/runtime/kernel.py): value
    # only when JSON can hold it, repr and type always.
    result = {"repr": repr(value)[:MAX_VALUE], "type": type(value).__name__,
              "stdout": out.text(), "stdout_truncated": out.truncated}
    try:
        if len(json.dumps(value, allow_nan=False)) <= MAX_VALUE:
            result["value"] = value
    except (TypeError, ValueError, RecursionError):
        pass
    return result
