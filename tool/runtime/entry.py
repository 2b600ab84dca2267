# execbox tool runtime. It runs inside a sandbox as
#
#     python3 -I -B /execbox/tool/entry.py
#
# with EXECBOX_TOOL_ACTION=list (discover every tool, answer their specs) or
# run (run EXECBOX_TOOL_NAME with the JSON object in EXECBOX_TOOL_ARGS, or in
# the work-dir file named by EXECBOX_TOOL_ARGS_FILE). EXECBOX_TOOL_DIRS lists
# the tools dirs, colon-separated, in override order: the built-ins (tools/
# next to this file) come first, each dir overrides those before it.
#
# The answer is exactly one JSON document, written to the original stdout,
# which is moved to a private fd before any tool code runs; fd 1 then points
# at stderr, so whatever a tool prints (print, os.write(1), children) lands
# on stderr and never in the protocol:
#
#     {"ok": true, "tools": [{name, description, parameters, source}], "problems": [{name, source, message}]}
#     {"ok": true, "result": <the tool's return value>}
#     {"ok": false, "error": {code, type, message, traceback}}   the tool failed
#     {"ok": false, "failure": {code, message}}                  refused before any tool code ran
#
# A failure of the runtime itself is a traceback on stderr and exit status
# 70. Kept compatible with Python 3.8.
import importlib.util
import json
import os
import re
import sys
import traceback

MAX_ARGS = 16 << 20          # bytes of arguments read
MAX_RESULT = 1 << 20         # bytes of a serialised result
MAX_MESSAGE = 4096           # characters of an error message
MAX_TRACEBACK = 16384        # characters of a traceback
MAX_TOOLS = 256              # tools listed
MAX_PROBLEMS = 256           # problems listed
MAX_DESCRIPTION = 4096       # characters of a description
MAX_PARAMETERS = 65536       # bytes of a serialised parameters schema
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}\Z")
HERE = os.path.dirname(os.path.abspath(__file__))
BUILTIN = "builtin"
SPEC_KEYS = {"name", "description", "parameters"}


class Failure(Exception):
    """A failure of the runtime (not of a tool's code), with its code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def load_helpers():
    """Registers execbox_tool.py as the module execbox_tool."""
    spec = importlib.util.spec_from_file_location("execbox_tool", os.path.join(HERE, "execbox_tool.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["execbox_tool"] = mod
    spec.loader.exec_module(mod)
    return mod


def sources():
    out = [(BUILTIN, os.path.join(HERE, "tools"))]
    for d in os.environ.get("EXECBOX_TOOL_DIRS", "").split(":"):
        if d:
            out.append((d, d))
    return out


def table(problems):
    """name → (source, path): every tool module of every source, a later
    source's module replacing an earlier one of the same name."""
    found = {}
    for source, d in sources():
        try:
            names = sorted(os.listdir(d))
        except OSError as err:
            problems.append({"name": "", "source": source, "message": "reading the tools dir: %s" % err})
            continue
        for n in names:
            if not n.endswith(".py") or n.startswith((".", "_")):
                continue
            path = os.path.join(d, n)
            if not os.path.isfile(path):
                continue
            name = n[:-3]
            if not NAME.match(name):
                problems.append({"name": name[:64], "source": source,
                                 "message": "%s: the file name is not a valid tool name "
                                            "(letters, digits, _ and -, at most 64)" % n})
                continue
            found[name] = (source, path)
    return found


def where(err):
    """The innermost frame of err as "file:line", for load errors."""
    tb = traceback.extract_tb(err.__traceback__)
    if isinstance(err, SyntaxError) and err.filename:
        return "%s:%s" % (err.filename, err.lineno)
    return "%s:%s" % (tb[-1].filename, tb[-1].lineno) if tb else ""


_loaded = [0]


def load(name, source, path):
    """Imports the tool module at path and checks its SPEC and execute;
    Failure tool_invalid says what is wrong."""
    def bad(why):
        return Failure("tool_invalid", "%s: %s" % (path, why))
    _loaded[0] += 1
    modname = "execbox_tools_%d_%s" % (_loaded[0], re.sub(r"\W", "_", name))
    try:
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
    except BaseException as err:
        raise bad("loading the module failed at %s: %s: %s"
                  % (where(err), type(err).__name__, str(err)[:MAX_MESSAGE])) from None
    s = getattr(mod, "SPEC", None)
    if not isinstance(s, dict):
        raise bad("the module defines no SPEC dict")
    extra = sorted(k for k in s if k not in SPEC_KEYS)
    if extra:
        raise bad("SPEC has unknown keys %s (want name, description, parameters)" % ", ".join(map(str, extra)))
    if s.get("name") != name:
        raise bad("SPEC name %r is not the file's name %r" % (s.get("name"), name))
    desc = s.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise bad("SPEC description must be a non-empty string")
    if len(desc) > MAX_DESCRIPTION:
        raise bad("SPEC description is longer than %d characters" % MAX_DESCRIPTION)
    params = s.get("parameters", {"type": "object"})
    if not isinstance(params, dict):
        raise bad("SPEC parameters must be a JSON Schema object (a dict)")
    try:
        text = json.dumps(params, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as err:
        raise bad("SPEC parameters are not JSON: %s" % err) from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PARAMETERS:
        raise bad("SPEC parameters are larger than %d bytes" % MAX_PARAMETERS)
    fn = getattr(mod, "execute", None)
    if not callable(fn):
        raise bad("the module defines no execute(args, ctx) function")
    return {"name": name, "description": desc, "parameters": params, "source": source}, fn


def list_tools():
    problems = []
    found = table(problems)
    tools = []
    for name in sorted(found):
        source, path = found[name]
        if len(tools) >= MAX_TOOLS:
            problems.append({"name": name, "source": source, "message": "more than %d tools" % MAX_TOOLS})
            continue
        try:
            spec, _ = load(name, source, path)
        except Failure as f:
            problems.append({"name": name, "source": source, "message": f.message[:MAX_MESSAGE]})
            continue
        tools.append(spec)
    return {"ok": True, "tools": tools, "problems": problems[:MAX_PROBLEMS]}


def read_args():
    path = os.environ.get("EXECBOX_TOOL_ARGS_FILE")
    if path:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                raw = f.read(MAX_ARGS + 1)
        except OSError as err:
            raise Failure("args_invalid", "reading the arguments file: %s" % err) from None
        try:
            os.unlink(path)  # the tool's work dir holds only what the caller put there
        except OSError:
            pass
    else:
        raw = os.environ.get("EXECBOX_TOOL_ARGS", "{}").encode("utf-8", "surrogateescape")
    if len(raw) > MAX_ARGS:
        raise Failure("args_too_large", "arguments exceed %d bytes" % MAX_ARGS)
    try:
        args = json.loads(raw)
    except ValueError as err:
        raise Failure("args_invalid", "arguments are not JSON: %s" % err) from None
    if not isinstance(args, dict):
        raise Failure("args_invalid", "arguments must be a JSON object")
    return args


def tool_traceback(err):
    """The traceback of err without the runtime's own frames."""
    frames = traceback.extract_tb(err.__traceback__)
    while frames and frames[0].filename == __file__:
        frames.pop(0)
    head = "Traceback (most recent call last):\n" if frames else ""
    text = head + "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(err), err))
    return text[-MAX_TRACEBACK:]


def encode_result(value):
    def reject(obj):
        raise TypeError("result contains a value of type %s, which is not JSON serialisable"
                        % type(obj).__qualname__)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=reject, separators=(",", ":"))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: escape them
            data = json.dumps(value, allow_nan=False, default=reject, separators=(",", ":")).encode()
    except ValueError as err:
        msg = str(err)
        if "Out of range float" in msg:
            msg = "it contains NaN or Infinity, which strict JSON does not allow"
        raise Failure("result_invalid", "the result is not valid JSON: %s" % msg) from None
    except (TypeError, RecursionError) as err:
        raise Failure("result_invalid", "the result is not valid JSON: %s" % err) from None
    if len(data) > MAX_RESULT:
        raise Failure("result_too_large", "the result exceeds %d bytes" % MAX_RESULT)
    return data


def run_tool(helpers):
    name = os.environ.get("EXECBOX_TOOL_NAME", "")
    found = table([])
    if name not in found:
        raise Failure("tool_not_found", "no tool named %r" % name[:256])
    source, path = found[name]
    args = read_args()
    _, fn = load(name, source, path)
    ctx = helpers.Context(name, source, os.path.dirname(path))
    try:
        result = fn(args, ctx)
    except BaseException as err:
        code, msg = "tool_error", None
        if isinstance(err, helpers.ToolError):
            code, msg = err.code, err.message
        return {"ok": False, "error": {
            "code": code, "type": type(err).__name__,
            "message": (msg or str(err) or type(err).__name__)[:MAX_MESSAGE],
            "traceback": tool_traceback(err)}}, None
    try:
        return {"ok": True}, encode_result(result)
    except Failure as f:
        return {"ok": False, "error": {"code": f.code, "type": "", "message": f.message, "traceback": ""}}, None


def respond(fd, doc, result=None):
    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    if result is not None:
        text = text[:-1] + ',"result":' + result.decode("utf-8") + "}"
    out = (text + "\n").encode("utf-8")
    view = memoryview(out)
    while view:
        view = view[os.write(fd, view):]


def main():
    protocol = os.dup(1)  # non-inheritable: a tool's children never get it
    os.dup2(2, 1)
    helpers = load_helpers()
    action = os.environ.get("EXECBOX_TOOL_ACTION", "")
    result = None
    try:
        if action == "list":
            doc = list_tools()
        elif action == "run":
            doc, result = run_tool(helpers)
        else:
            raise Failure("action_invalid", "EXECBOX_TOOL_ACTION %r is not list or run" % action[:64])
    except Failure as f:
        # The runtime's own refusal, before any tool code ran: "failure", not "error".
        doc = {"ok": False, "failure": {"code": f.code, "message": f.message[:MAX_MESSAGE]}}
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass
    respond(protocol, doc, result)


try:
    main()
except BaseException:
    try:
        sys.stderr.flush()
    except Exception:
        pass
    os.write(2, ("execbox tool runtime: " + traceback.format_exc()).encode("utf-8", "replace"))
    os._exit(70)
os._exit(0)
