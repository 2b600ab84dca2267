# Built-in tool: read a file of the work dir.
import base64

from execbox_tool import ToolError, open_file

SPEC = {
    "name": "read_file",
    "description": "Read a file of the work dir (a relative path; symlinks are never followed). "
                   "Returns its text (UTF-8, invalid bytes replaced) or base64, at most max_bytes.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "path relative to the work dir", "minLength": 1, "maxLength": 4096},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": 262144, "default": 262144},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}

MAX_BYTES = 262144


def execute(args, ctx):
    path = args["path"]
    limit = min(int(args.get("max_bytes", MAX_BYTES)), MAX_BYTES)
    if limit < 1:
        raise ToolError("args_invalid", "max_bytes must be at least 1")
    with open_file(path) as f:
        data = f.read(limit + 1)
    truncated = len(data) > limit
    data = data[:limit]
    if args.get("encoding", "utf-8") == "base64":
        content = base64.b64encode(data).decode("ascii")
    else:
        content = data.decode("utf-8", "replace")
    return {"path": path, "content": content, "encoding": args.get("encoding", "utf-8"),
            "bytes": len(data), "truncated": truncated}
