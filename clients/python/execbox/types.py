"""The API's answers as dataclasses (field names as in the JSON)."""

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class Usage:
    wall_ns: int = 0
    cpu_ns: int = 0
    peak_memory_bytes: int = 0


@dataclass
class Artifact:
    path: str
    size: int
    mode: int
    data: bytes


@dataclass
class RunResult:
    """A run's result: how it ended (reason, exit_code, signal) and its output.

    stdout and stderr are text; output that was not UTF-8 comes byte for
    byte in stdout_bytes / stderr_bytes instead (the text field is then
    empty).
    """
    backend: str
    isolation: str
    reason: str
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: Optional[bytes] = None
    stderr_bytes: Optional[bytes] = None
    signal: str = ""
    message: str = ""
    id: str = ""
    usage: Usage = field(default_factory=Usage)
    artifacts: List[Artifact] = field(default_factory=list)
    skipped: List[Dict[str, str]] = field(default_factory=list)
    enforcement: Dict[str, str] = field(default_factory=dict)
    # The limits the run had (seconds and bytes), and where each of them,
    # the backend and the network came from: "call", "config" or "default".
    limits: Dict[str, Any] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The program ran and exited 0."""
        return self.reason == "exited" and self.exit_code == 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "RunResult":
        return cls(
            backend=d.get("backend", ""), isolation=d.get("isolation", ""), reason=d.get("reason", ""),
            exit_code=d.get("exit_code", 0), stdout=d.get("stdout", ""), stderr=d.get("stderr", ""),
            stdout_truncated=d.get("stdout_truncated", False), stderr_truncated=d.get("stderr_truncated", False),
            stdout_bytes=_b64(d.get("stdout_base64")), stderr_bytes=_b64(d.get("stderr_base64")),
            signal=d.get("signal", ""), message=d.get("message", ""), id=d.get("id", ""),
            usage=Usage(**{k: d.get("usage", {}).get(k, 0) for k in ("wall_ns", "cpu_ns", "peak_memory_bytes")}),
            artifacts=[Artifact(a["path"], a.get("size", 0), a.get("mode", 0), _b64(a.get("data")) or b"")
                       for a in d.get("artifacts") or []],
            skipped=d.get("skipped") or [], enforcement=d.get("enforcement") or {},
            limits=d.get("limits") or {}, sources=d.get("sources") or {},
        )


@dataclass
class Diagnostic:
    """A lint finding: lines 1-based, columns 0-based (the editor format)."""
    line: int
    column: int
    endLine: int
    endColumn: int
    message: str
    type: str = "error"


@dataclass
class FunctionResponse:
    """A function call's answer: data when ok, else error and code."""
    ok: bool
    data: Any = None
    error: str = ""
    code: str = ""
    type: str = ""
    traceback: str = ""
    stdout: str = ""
    stdout_truncated: bool = False
    duration_ms: int = 0
    backend: str = ""
    isolation: str = ""
    diagnostics: List[Diagnostic] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FunctionResponse":
        return cls(ok=d.get("ok", False), data=d.get("data"), error=d.get("error", ""), code=d.get("code", ""),
                   type=d.get("type", ""), traceback=d.get("traceback", ""), stdout=d.get("stdout", ""),
                   stdout_truncated=d.get("stdout_truncated", False), duration_ms=d.get("duration_ms", 0),
                   backend=d.get("backend", ""), isolation=d.get("isolation", ""),
                   diagnostics=[Diagnostic(**x) for x in d.get("diagnostics") or []])


@dataclass
class CodeError:
    """What a context call raised."""
    type: str
    message: str
    traceback: str = ""


@dataclass
class CodeResult:
    """How a call in an interpreter context ended. Code that raised is
    ok False with error; at the timeout interrupted is True and the
    context keeps its state; lost says the context did not survive (the
    next call makes a new one). value is the last expression's value when
    JSON can carry it, repr its printed form and type its type's name."""
    ok: bool
    context: str = ""
    value: Any = None
    repr: str = ""
    type: str = ""
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: Optional[CodeError] = None
    interrupted: bool = False
    lost: bool = False
    duration_ms: float = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any], context: str = "") -> "CodeResult":
        e = d.get("error")
        return cls(ok=d.get("ok", False), context=context, value=d.get("value"), repr=d.get("repr", ""),
                   type=d.get("type", ""), stdout=d.get("stdout", ""), stderr=d.get("stderr", ""),
                   stdout_truncated=d.get("stdout_truncated", False), stderr_truncated=d.get("stderr_truncated", False),
                   error=CodeError(e.get("type", ""), e.get("message", ""), e.get("traceback", "")) if e else None,
                   interrupted=d.get("interrupted", False), lost=d.get("lost", False),
                   duration_ms=d.get("duration_ms", 0))


@dataclass
class StreamEvent:
    """One event of a streamed run: type is stdout or stderr (data holds the
    chunk's bytes), then one result."""
    type: str
    data: bytes = b""
    result: Optional[RunResult] = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _check_path(p: str) -> None:
    """Refuses, before anything is sent, a path the server refuses too: it
    must be relative, without "..", "." or empty parts."""
    from .errors import ExecboxError
    if not p or p.startswith("/") or "\x00" in p or any(c in ("", ".", "..") for c in p.split("/")):
        raise ExecboxError("path_invalid", "path %r: want a relative path without '..', '.' or empty parts" % p)


def _b64(v: Optional[str]) -> Optional[bytes]:
    return base64.b64decode(v) if v else None
