"""The sync Client and the asyncio AsyncClient."""

import asyncio
import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .errors import ExecboxError
from .session import Session
from .types import Diagnostic, FunctionResponse, RunResult, StreamEvent


class Client:
    """The execbox HTTP API (POST /v1/runs, /v1/functions:execute and :lint,
    GET /v1/health and /v1/backends).

    base_url is $EXECBOX_URL when not given (else http://127.0.0.1:8080),
    token $EXECBOX_TOKEN. timeout bounds each request's connect and every
    read, in seconds; a run's own wall limit is the server's business
    (limits={"wall": 5}).
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, timeout: float = 120.0):
        # As the CLI: $EXECBOX_URL and $EXECBOX_TOKEN before the defaults.
        base_url = base_url or os.environ.get("EXECBOX_URL") or "http://127.0.0.1:8080"
        if token is None:
            token = os.environ.get("EXECBOX_TOKEN") or None
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ExecboxError("url_invalid", "server URL %r: want http(s)://host:port" % base_url)
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # --- runs -----------------------------------------------------------

    def run(self, command: Optional[Sequence[str]] = None, *, code: Optional[str] = None, language: Optional[str] = None,
            stdin: Optional[str] = None, files: Optional[Dict[str, bytes]] = None, env: Optional[Dict[str, str]] = None,
            limits: Optional[Dict[str, Any]] = None, backend: str = "", tier: str = "", min_isolation: str = "",
            image: str = "", tmp_exec: bool = False, scope: str = "", explain: bool = False) -> RunResult:
        """Runs a command (argv, no shell) or code in a fresh sandbox and
        returns its result. A program that fails is a result, not an error."""
        body = _run_body(command, code, language, stdin, files, env, limits, backend, tier, min_isolation, image, tmp_exec, scope)
        q = {"explain": "1"} if explain else None
        with self._post("/v1/runs", body, q, "application/json") as resp:
            return RunResult.from_json(json.load(resp))

    def run_stream(self, command: Optional[Sequence[str]] = None, **kw: Any) -> Iterator[StreamEvent]:
        """Like run, but yields stdout and stderr chunks as the program
        writes them, then one event whose result is set."""
        explain = kw.pop("explain", False)
        body = _run_body(command, kw.pop("code", None), kw.pop("language", None), kw.pop("stdin", None), kw.pop("files", None),
                         kw.pop("env", None), kw.pop("limits", None), kw.pop("backend", ""), kw.pop("tier", ""),
                         kw.pop("min_isolation", ""), kw.pop("image", ""), kw.pop("tmp_exec", False), kw.pop("scope", ""))
        if kw:
            raise TypeError("unexpected arguments: %s" % ", ".join(sorted(kw)))
        q = {"stream": "1"}
        if explain:
            q["explain"] = "1"
        with self._post("/v1/runs", body, q, "application/x-ndjson") as resp:
            for line in resp:
                if not line.strip():
                    continue
                ev = json.loads(line)
                t = ev.get("type")
                if t in ("stdout", "stderr"):
                    data = base64.b64decode(ev["data_base64"]) if ev.get("data_base64") else ev.get("data", "").encode()
                    yield StreamEvent(t, data)
                elif t == "result":
                    yield StreamEvent(t, result=RunResult.from_json(ev["result"]))
                    return
                elif t == "error":
                    raise ExecboxError.from_problem(resp.status, ev.get("error") or {})
        raise ExecboxError("stream_failed", "the run's stream ended without a result")

    # --- functions ------------------------------------------------------

    def execute(self, code: str, params: Optional[Dict[str, Any]] = None, *, entrypoint: str = "", language: str = "",
                timeout: float = 0, backend: str = "", tier: str = "", min_isolation: str = "") -> FunctionResponse:
        """Calls a function (the function protocol). A function that raised
        is a response with ok False and its code (user_error, timeout, ...);
        other failures raise ExecboxError."""
        body = _fn_body(code, params, entrypoint, language, timeout, backend, tier, min_isolation)
        with self._post("/v1/functions:execute", body, None, "application/json") as resp:
            return FunctionResponse.from_json(json.load(resp))

    def lint(self, code: str, language: str = "") -> List[Diagnostic]:
        """Parses code without running it; [] means valid."""
        with self._post("/v1/functions:lint", _fn_body(code, None, "", language, 0, "", "", ""), None, "application/json") as resp:
            r = FunctionResponse.from_json(json.load(resp))
        if not r.ok:
            raise ExecboxError(r.code, r.error)
        return r.diagnostics

    # --- sessions -------------------------------------------------------

    def create_session(self, *, limits: Optional[Dict[str, Any]] = None, env: Optional[Dict[str, str]] = None,
                       files: Optional[Dict[str, bytes]] = None, ttl: float = 0, idle_timeout: float = 0,
                       labels: Optional[Dict[str, str]] = None, backend: str = "", tier: str = "",
                       min_isolation: str = "", image: str = "") -> "Session":
        """Opens a session: a sandbox that keeps its files across execs until
        it is closed, its ttl passes or it goes unused for idle_timeout
        (seconds; 0 takes the server's, 30 min and 10 min). image names its
        root filesystem, as for a run."""
        body: Dict[str, Any] = {}
        for k, v in (("limits", limits), ("env", env), ("labels", labels), ("ttl", ttl), ("idle_timeout", idle_timeout),
                     ("backend", backend), ("tier", tier), ("min_isolation", min_isolation), ("image", image)):
            if v:
                body[k] = v
        if files:
            body["files"] = {p: base64.b64encode(b).decode() for p, b in files.items()}
        with self._post("/v1/sessions", body, None, "application/json") as resp:
            return Session(self, json.load(resp))

    def session(self, session_id: str) -> "Session":
        """One of your open sessions, by id."""
        with self._request("GET", "/v1/sessions/" + urllib.parse.quote(session_id, safe=""), None, None, "application/json") as resp:
            return Session(self, json.load(resp))

    def sessions(self) -> List[Dict[str, Any]]:
        """Your open sessions (all of them for an admin token), oldest first."""
        with self._request("GET", "/v1/sessions", None, None, "application/json") as resp:
            return json.load(resp).get("sessions", [])

    # --- tools and approvals ------------------------------------------

    def tools(self, *, backend: str = "") -> Dict[str, Any]:
        """The server's tools {"tools": [{name, description, parameters,
        source}], "problems": [...]}; backend says where a discovery that is
        due runs."""
        q = {"backend": backend} if backend else None
        with self._request("GET", "/v1/tools", None, q, "application/json") as resp:
            return json.load(resp)

    def run_tool(self, name: str, args: Optional[Dict[str, Any]] = None, *, files: Optional[Dict[str, bytes]] = None,
                 timeout: Optional[float] = None, backend: str = "", tier: str = "", min_isolation: str = "") -> Dict[str, Any]:
        """Runs a tool with args (checked against its schema before anything
        runs). Returns {"ok": true, "result": ...} or, when the tool failed,
        {"ok": false, "error": {code, type, message, traceback}}; a call
        refused before it ran raises ExecboxError."""
        body: Dict[str, Any] = {}
        if args is not None:
            body["args"] = args
        if files:
            body["files"] = {p: base64.b64encode(c if isinstance(c, bytes) else c.encode()).decode() for p, c in files.items()}
        for k, v in (("timeout", timeout), ("backend", backend), ("tier", tier), ("min_isolation", min_isolation)):
            if v:
                body[k] = v
        path = "/v1/tools/" + urllib.parse.quote(name, safe="") + ":run"
        with self._post(path, body, None, "application/json") as resp:
            return json.load(resp)

    def approvals(self) -> List[Dict[str, Any]]:
        """The executions a guard rule holds for a decision (admin token)."""
        with self._request("GET", "/v1/approvals", None, None, "application/json") as resp:
            return json.load(resp).get("approvals", [])

    def decide(self, approval_id: str, approve: bool, reason: str = "") -> None:
        """Approves (it runs) or denies (approval_denied) a held execution."""
        body: Dict[str, Any] = {"approve": approve}
        if reason:
            body["reason"] = reason
        with self._post("/v1/approvals/" + urllib.parse.quote(approval_id, safe=""), body, None, "application/json"):
            pass

    # --- the server -----------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """The selection report: each backend, ready or why not, what auto picks."""
        with self._request("GET", "/v1/health", None, None, "application/json") as resp:
            return json.load(resp)

    def backends(self) -> List[Dict[str, Any]]:
        with self._request("GET", "/v1/backends", None, None, "application/json") as resp:
            return json.load(resp).get("backends", [])

    # --- transport ------------------------------------------------------

    def _post(self, path: str, body: Dict[str, Any], query: Optional[Dict[str, str]], accept: str):
        return self._request("POST", path, body, query, accept)

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]], query: Optional[Dict[str, str]], accept: str):
        url = path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        return self._raw(method, url, data, "application/json", accept)

    def _raw(self, method: str, path: str, data: Any, content_type: str, accept: str):
        """Sends data (bytes, a binary file object or an iterator of bytes,
        both streamed in chunks, or None) as the body of content_type."""
        url = self.base_url + path
        if hasattr(data, "read"):
            # An iterator: urllib sends it chunked, never reading it whole.
            f = data
            data = iter(lambda: f.read(1 << 16), b"")
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", accept)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            try:
                problem = json.load(e)
            except ValueError:
                problem = {}
            raise ExecboxError.from_problem(e.code, problem if isinstance(problem, dict) else {}) from None
        except (urllib.error.URLError, OSError) as e:
            raise ExecboxError("server_unreachable", "%s %s: %s" % (method, path.split("?")[0], e)) from None


class AsyncClient:
    """Client's methods as coroutines (each runs the sync call in a thread);
    run_stream is an async iterator."""

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, timeout: float = 120.0):
        self._c = Client(base_url, token, timeout)

    async def run(self, command: Optional[Sequence[str]] = None, **kw: Any) -> RunResult:
        return await asyncio.to_thread(self._c.run, command, **kw)

    async def execute(self, code: str, params: Optional[Dict[str, Any]] = None, **kw: Any) -> FunctionResponse:
        return await asyncio.to_thread(self._c.execute, code, params, **kw)

    async def lint(self, code: str, language: str = "") -> List[Diagnostic]:
        return await asyncio.to_thread(self._c.lint, code, language)

    async def run_tool(self, name: str, args: Optional[Dict[str, Any]] = None, **kw: Any) -> Dict[str, Any]:
        return await asyncio.to_thread(self._c.run_tool, name, args, **kw)

    async def health(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self._c.health)

    async def create_session(self, **kw: Any) -> Session:
        """Opens a session; its methods are the sync Session's (run them
        with asyncio.to_thread where blocking matters)."""
        return await asyncio.to_thread(self._c.create_session, **kw)

    async def run_stream(self, command: Optional[Sequence[str]] = None, **kw: Any):
        it = self._c.run_stream(command, **kw)
        done = object()
        while True:
            ev = await asyncio.to_thread(next, it, done)
            if ev is done:
                return
            yield ev


def _run_body(command, code, language, stdin, files, env, limits, backend, tier, min_isolation,
              image="", tmp_exec=False, scope="") -> Dict[str, Any]:
    if (command is None) == (code is None):
        raise ExecboxError("request_invalid", "give command or code, not both")
    body: Dict[str, Any] = {}
    if command is not None:
        if isinstance(command, str):
            raise ExecboxError("request_invalid", "command is argv (a list), not a shell string")
        body["command"] = list(command)
    else:
        body["code"] = code
        if language:
            body["language"] = language
    if stdin is not None:
        body["stdin"] = stdin
    if files:
        body["files"] = {p: base64.b64encode(c if isinstance(c, bytes) else c.encode()).decode() for p, c in files.items()}
    for k, v in (("env", env), ("limits", limits), ("backend", backend), ("tier", tier), ("min_isolation", min_isolation),
                 ("image", image), ("tmp_exec", tmp_exec), ("scope", scope)):
        if v:
            body[k] = v
    return body


def _fn_body(code, params, entrypoint, language, timeout, backend, tier, min_isolation) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": code}
    for k, v in (("params", params), ("entrypoint", entrypoint), ("language", language), ("timeout", timeout),
                 ("backend", backend), ("tier", tier), ("min_isolation", min_isolation)):
        if v:
            body[k] = v
    return body
