"""Errors: one exception type carrying the server's stable code."""

class ExecboxError(Exception):
    """A failure the server (or the way to it) reported.

    code is the stable machine code (``busy``, ``unauthenticated``,
    ``isolation_too_weak``, ``user_error``, ...), status the HTTP status (0
    when the server was not reached), retry_after the seconds a 429 or 503
    asks to wait.
    """

    def __init__(self, code: str, message: str, status: int = 0, request_id: str = "",
                 retry_after: int = 0, field: str = ""):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after
        self.field = field

    @classmethod
    def from_problem(cls, status: int, problem: dict) -> "ExecboxError":
        return cls(code=problem.get("code") or "http_%d" % status, message=problem.get("detail") or problem.get("title") or "",
                   status=problem.get("status") or status, request_id=problem.get("request_id") or "",
                   retry_after=problem.get("retry_after") or 0, field=problem.get("field") or "")
