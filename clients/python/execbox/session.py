"""Sessions: a sandbox on the server that keeps its files across execs."""

import base64
import json
import shutil
import urllib.parse
import uuid
from typing import IO, TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import ExecboxError
from .types import CodeResult, RunResult, _check_path

if TYPE_CHECKING:
    from .client import Client

_CHUNK = 1 << 16


class Session:
    """An open session (Client.create_session). Files written by one exec
    are there for the next; every path is relative to the work dir. It is a
    context manager that closes the session on exit.

        with c.create_session(idle_timeout=300) as s:
            s.put_file("data.csv", b"a,b\\n1,2\\n")
            r = s.exec(code="print(open('data.csv').read())")
            s.exec(["sh", "-c", "gzip -k data.csv"])
            blob = s.get_file("data.csv.gz")
    """

    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._c = client
        self.info = info
        self.id: str = info["id"]
        self._contexts: Dict[str, str] = {}  # language -> run_code's context

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Session(%r, backend=%r)" % (self.id, self.info.get("backend"))

    def _path(self, op: str, path: str = "") -> str:
        p = "/v1/sessions/" + urllib.parse.quote(self.id, safe="") + "/" + op
        if path:
            _check_path(path)
            p += "/" + urllib.parse.quote(path, safe="/")
        return p

    def refresh(self) -> Dict[str, Any]:
        """The session as the server sees it now (execs, last_used, expires)."""
        with self._c._request("GET", "/v1/sessions/" + urllib.parse.quote(self.id, safe=""), None, None, "application/json") as resp:
            self.info = json.load(resp)
        return self.info

    def exec(self, command: Optional[Sequence[str]] = None, *, code: Optional[str] = None, language: Optional[str] = None,
             stdin: Union[str, bytes, None] = None, env: Optional[Dict[str, str]] = None, dir: str = "",
             timeout: float = 0) -> RunResult:
        """Runs a command (argv, no shell) or code (python3 -c, node -e, sh
        -c, bash -c) in the session's work dir. A program that fails is a
        result, not an error."""
        if (command is None) == (code is None):
            raise ExecboxError("request_invalid", "give command or code")
        body: Dict[str, Any] = {}
        if command is not None:
            body["command"] = list(command)
        else:
            body["code"] = code
            if language:
                body["language"] = language
        if isinstance(stdin, bytes):
            body["stdin_base64"] = base64.b64encode(stdin).decode()
        elif stdin is not None:
            body["stdin"] = stdin
        if env:
            body["env"] = env
        if dir:
            body["dir"] = dir
        if timeout:
            body["timeout"] = timeout
        with self._c._post(self._path("exec"), body, None, "application/json") as resp:
            return RunResult.from_json(json.load(resp))

    def put_file(self, path: str, data: Union[bytes, str, IO[bytes]]) -> Dict[str, Any]:
        """Uploads data (bytes, text, or a binary file object, which is
        streamed) as the file at path, creating missing directories."""
        if isinstance(data, str):
            data = data.encode()
        with self._c._raw("PUT", self._path("files", path), data, "application/octet-stream", "application/json") as resp:
            return json.load(resp)

    def upload(self, files: Union[Dict[str, Any], Sequence[Tuple[str, Any]]], dir: str = "") -> List[Dict[str, Any]]:
        """Uploads several files with one multipart request into dir ("" is
        the work dir), creating missing directories. files maps each path
        (it may hold "/") to its data: bytes, text, or a binary file object,
        which is streamed. Returns what was written, in order; when a file
        fails, the ones before it stay written (the error says which)."""
        items = list(files.items()) if isinstance(files, dict) else list(files)
        for p, _ in items:
            _check_path(p)
            if "\r" in p or "\n" in p:
                raise ExecboxError("path_invalid", "path %r: a line break cannot travel in a part's header" % p)
        boundary = "execbox-" + uuid.uuid4().hex

        def body() -> Iterator[bytes]:
            for p, data in items:
                name = p.replace("\\", "\\\\").replace('"', '\\"')
                yield ('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
                       'Content-Type: application/octet-stream\r\n\r\n' % (boundary, name)).encode()
                if isinstance(data, str):
                    yield data.encode()
                elif isinstance(data, (bytes, bytearray)):
                    yield bytes(data)
                else:
                    yield from iter(lambda: data.read(_CHUNK), b"")
                yield b"\r\n"
            yield ("--%s--\r\n" % boundary).encode()

        path = self._path("upload", dir) if dir else self._path("upload")
        with self._c._raw("POST", path, body(), "multipart/form-data; boundary=" + boundary, "application/json") as resp:
            return json.load(resp).get("files", [])

    def get_file(self, path: str, out: Optional[IO[bytes]] = None) -> Optional[bytes]:
        """Downloads the regular file at path: its bytes, or, given out (a
        binary file object), streamed into it (and None is returned)."""
        with self._c._raw("GET", self._path("files", path), None, "", "application/octet-stream") as resp:
            if out is None:
                return resp.read()
            shutil.copyfileobj(resp, out, _CHUNK)
            return None

    def stat(self, path: str = "") -> Dict[str, Any]:
        """{path, type (file, dir, symlink, other), size, mode, mtime}; a
        symlink is described, never followed."""
        p = self._path("stat", path) if path else self._path("stat") + "/"
        with self._c._request("GET", p, None, None, "application/json") as resp:
            return json.load(resp)

    def list(self, dir: str = "") -> List[Dict[str, Any]]:
        """The entries of dir ("" is the work dir), sorted by name."""
        with self._c._request("GET", self._path("list", dir), None, None, "application/json") as resp:
            return json.load(resp).get("entries", [])

    def remove(self, path: str) -> None:
        """Removes a file, or a directory with everything in it."""
        self._c._request("DELETE", self._path("files", path), None, None, "application/json").close()

    def mkdir(self, path: str) -> Dict[str, Any]:
        """Creates a directory and its missing parents."""
        with self._c._request("POST", self._path("mkdir", path), None, None, "application/json") as resp:
            return json.load(resp)

    def run_code(self, code: str, *, context: Optional[str] = None, language: str = "python",
                 timeout: float = 0) -> CodeResult:
        """Runs code in an interpreter context of the session, like a
        notebook cell: variables, imports and definitions stay for the next
        call. Without context, this Session's context of the language is
        used (made the first time). Code that raised is a CodeResult with
        ok False and error, not an exception; at the timeout the call is
        interrupted and the context keeps its state."""
        if context is None:
            context = self._contexts.get(language)
            if context is None:
                context = self.create_context(language)["id"]
                self._contexts[language] = context
        body: Dict[str, Any] = {"code": code}
        if timeout:
            body["timeout"] = timeout
        with self._c._post(self._context_path(context) + "/run", body, None, "application/json") as resp:
            out = CodeResult.from_json(json.load(resp), context)
        if out.lost and self._contexts.get(language) == context:
            del self._contexts[language]  # the next call makes a new one
        return out

    def create_context(self, language: str = "python") -> Dict[str, Any]:
        """Starts an interpreter context (python or javascript): {id,
        language, created, calls}."""
        with self._c._post(self._path("contexts"), {"language": language}, None, "application/json") as resp:
            return json.load(resp)

    def contexts(self) -> List[Dict[str, Any]]:
        """The session's contexts, oldest first (a lost one says why)."""
        with self._c._request("GET", self._path("contexts"), None, None, "application/json") as resp:
            return json.load(resp).get("contexts", [])

    def reset_context(self, context: str) -> Dict[str, Any]:
        """Starts a context afresh under the same id: its state is gone."""
        with self._c._request("POST", self._context_path(context) + "/reset", None, None, "application/json") as resp:
            return json.load(resp)

    def delete_context(self, context: str) -> None:
        """Ends a context."""
        self._c._request("DELETE", self._context_path(context), None, None, "application/json").close()
        for lang, c in list(self._contexts.items()):
            if c == context:
                del self._contexts[lang]

    def _context_path(self, context: str) -> str:
        return self._path("contexts") + "/" + urllib.parse.quote(context, safe="")

    def close(self) -> None:
        """Closes the session; closing a closed one succeeds."""
        self._c._request("DELETE", "/v1/sessions/" + urllib.parse.quote(self.id, safe=""), None, None, "application/json").close()
