# Helpers for execbox tools. A tool module may `import execbox_tool`: the
# runtime (entry.py) registers this file under that name before it loads any
# tool. Kept compatible with Python 3.8.
import errno
import os
import re
import stat

# The work dir: the process's working directory when the runtime started.
WORK_DIR = os.getcwd()

CODE = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
MAX_PATH = 4096
MAX_NAME = 255


class ToolError(Exception):
    """Raise ToolError(code, message) from execute to fail with a stable,
    snake_case code instead of the generic tool_error."""

    def __init__(self, code, message):
        if not isinstance(code, str) or not CODE.match(code):
            code = "tool_error"
        super().__init__(message)
        self.code = code
        self.message = str(message)


class Context:
    """What execute(args, ctx) gets besides its arguments."""

    def __init__(self, name, source, tool_dir):
        self.name = name            # the tool's name
        self.source = source        # "builtin" or the tools dir it came from
        self.tool_dir = tool_dir    # the directory of the tool's module (read-only)
        self.work_dir = WORK_DIR    # the sandbox's work dir (writable)
        # The sandbox's network mode: "none" (loopback only) or "host".
        self.network = os.environ.get("EXECBOX_TOOL_NETWORK") or "none"

    @property
    def network_allowed(self):
        return self.network != "none"


def check_path(path):
    """Splits a caller's path relative to the work dir into its components,
    refusing an empty or absolute path, '..', '.' or empty components, NUL
    bytes and over-long names (ToolError path_invalid)."""
    def bad(why):
        return ToolError("path_invalid", "path %r: %s" % (path, why))
    if not isinstance(path, str) or path == "":
        raise bad("empty")
    if "\x00" in path:
        raise bad("contains a NUL byte")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH:
        raise bad("longer than 4096 bytes")
    if path.startswith("/"):
        raise bad("absolute paths are not allowed")
    parts = path.split("/")
    for p in parts:
        if p == "..":
            raise bad("'..' is not allowed")
        if p in ("", "."):
            raise bad("empty or '.' component")
        if len(p.encode("utf-8", "surrogateescape")) > MAX_NAME:
            raise bad("a component is longer than 255 bytes")
    return parts


def _walk(parts, create, path):
    """Opens the directory parts[:-1] below the work dir, one component at a
    time, never following a symlink; creates missing ones when create."""
    fd = os.open(WORK_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for p in parts[:-1]:
            if create:
                try:
                    os.mkdir(p, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path, write=False):
    """Opens the regular file at path in the work dir for binary reading
    (or writing: created or truncated, parents created), never following a
    symlink anywhere on the way. ToolError path_invalid, file_not_found or
    not_a_file otherwise."""
    parts = check_path(path)
    try:
        dfd = _walk(parts, write, path)
        try:
            flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            flags |= (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dfd)
        finally:
            os.close(dfd)
    except FileNotFoundError:
        raise ToolError("file_not_found", "%s: no such file or directory" % path) from None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise ToolError("path_invalid", "%s: a symlink or a non-directory is in the way" % path) from None
        if err.errno == errno.ENXIO:
            raise ToolError("not_a_file", "%s: not a regular file" % path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError("not_a_file", "%s: not a regular file" % path)
        os.set_blocking(fd, True)
        if write:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb" if write else "rb")
