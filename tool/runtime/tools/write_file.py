# Built-in tool: write a file of the work dir.
import base64
import binascii

from execbox_tool import ToolError, open_file

SPEC = {
    "name": "write_file",
    "description": "Create or replace a file of the work dir (a relative path; missing parent "
                   "directories are created; symlinks are never followed) with the given text or "
                   "base64 content. The file comes back as an artifact of the call.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "path relative to the work dir", "minLength": 1, "maxLength": 4096},
            "content": {"type": "string", "description": "the file's content"},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
}

MAX_BYTES = 8 << 20


def execute(args, ctx):
    path, content = args["path"], args["content"]
    if args.get("encoding", "utf-8") == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as err:
            raise ToolError("args_invalid", "content is not base64: %s" % err) from None
    else:
        data = content.encode("utf-8", "surrogatepass")
    if len(data) > MAX_BYTES:
        raise ToolError("file_too_large", "content exceeds %d bytes" % MAX_BYTES)
    with open_file(path, write=True) as f:
        f.write(data)
    return {"path": path, "bytes": len(data)}
