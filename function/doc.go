// Package function implements execbox's function-call protocol:
// a request {code, params, entrypoint, mode} runs one user-written function
// in a sandbox and answers {ok: true, data} or {ok: false, error}, with a
// lint mode that only parses. It is implemented once, for every backend:
// the package never chooses a backend, it hands a sandbox.Spec and a
// sandbox.Process to an Engine (package engine), which does.
//
// # Wire format
//
// Request (JSON; ReadRequest decodes one, at most 128 KiB, unknown fields
// refused):
//
//	{"code": "def main(a, b):\n    return a + b", "params": {"a": 2, "b": 40},
//	 "entrypoint": "main", "mode": "execute", "language": "python",
//	 "timeout": 15, "backend": "", "tier": "", "min_isolation": ""}
//
// Only code is required. timeout is seconds (a number) or a duration
// string ("1500ms"), accepted from 1 s to 60 s, 15 s when absent. backend,
// tier and min_isolation are the call's sandbox.Selection, passed to the
// Engine.
//
// Response (WriteResponse writes one line):
//
//	{"ok": true, "data": 42, "stdout": "…", "duration_ms": 31, "backend": "native", "isolation": "process"}
//	{"ok": false, "error": "division by zero", "code": "user_error", "type": "ZeroDivisionError",
//	 "traceback": "Traceback (most recent call last):\n  File \"function.py\", line 2, in main\n…"}
//
// A lint answers {"ok": true, "data": [diagnostics…], "diagnostics": [diagnostics…]}:
// data keeps the protocol's original shape, diagnostics is the named field; valid code
// gives []. A diagnostic is {line, column, endLine, endColumn, message,
// type}: lines are 1-based; columns are 0-based offsets in UTF-16 code
// units, the end exclusive, for both languages — what a JavaScript editor
// adds to the start of the line (an editor's lint integration does exactly
// that). The range is never empty. Lint compiles (Python: compile(), which
// also finds errors ast.parse misses; JavaScript: new vm.Script) and never
// runs the code.
//
// # Errors
//
// Every failure is a Response with ok false, an English message and a
// stable code (the Code… constants); Response.Err turns it into a
// *sandbox.Error whose kind transports map. Seed 004's table:
//
//	invalid_code          code must not be empty or exceed 64 KiB          ErrInvalid
//	input_too_large       function input exceeds 128 KiB                  ErrLimit
//	busy                  function executor is busy; try again later       ErrBusy
//	timeout               execution timed out; the process tree was killed ErrLimit
//	sandbox_failed        sandbox failed to start or run the function: …   ErrInternal
//	isolation_unavailable isolation unavailable: …; the code was not run   ErrUnavailable
//	output_invalid        function output is invalid or over its limit: …  ErrInternal
//	response_invalid      function response is not a valid response: …     ErrInternal
//	interrupted           execution was interrupted                        ErrInternal
//
// output_invalid: the protocol channel is empty, not one JSON document, or
// over its 1 MiB limit. response_invalid: it is JSON but not a protocol
// response. isolation_unavailable comes from an Engine error of kind
// sandbox.ErrUnavailable; the package never retries elsewhere.
//
// Failures of the user's code (kind ErrInvalid, or ErrLimit for the size):
// user_error (the exception's message verbatim, its class in type, a
// traceback limited to frames of the user's code), syntax_error,
// entrypoint_not_found, result_invalid (NaN, Infinity, or a value of a type
// JSON does not have — the message names the type), result_too_large
// ("result exceeds 256 KiB"). Others: invalid_request, memory_limit,
// denied (the engine's policy refused), internal_error.
//
// # Invariants
//
//   - The runner is embedded (go:embed) and reaches the interpreter as one
//     argv element — python3 -I -B -c <bootstrap>, node -e <bootstrap> —
//     where the bootstrap holds only base64 text, quotes and punctuation (no
//     space, $, backtick, backslash or double quote) and decodes the
//     runner. No script file is written; the request goes on stdin.
//   - The response is the only thing on the runner's stdout. Before user
//     code runs, the Python runner moves its stdout to a private,
//     non-inheritable fd and points fds 1 and 2 at a pipe it drains into an
//     8 KiB buffer; the JavaScript runner runs the function in a child Node
//     process whose fds 1 and 2 are pipes it drains the same way and whose
//     result comes back on fd 3. So print, console.log, os.write(1, …) and
//     child processes' output all land in "stdout" (first 8 KiB, then
//     stdout_truncated), never in the protocol. Code that deliberately
//     writes to the runner's private fd can only spoil its own answer
//     (output_invalid).
//   - __name__ is "execbox_function", so `if __name__ == "__main__":` blocks
//     do not run; in JavaScript require.main !== module likewise.
//   - The return value is strict JSON of at most 256 KiB (MaxResult).
//   - Bounds: code 64 KiB, input 128 KiB (the document the runner reads:
//     {code, params, entrypoint, mode}), result 256 KiB, stdout 8 KiB,
//     error message 4 KiB, traceback 16 KiB.
//
// # Calling convention
//
// Entry point: empty means the last top-level function (Python: def or
// async def; JavaScript: function or async function declaration); a name
// that is not defined is entrypoint_not_found. Python calls
// entry(**params). JavaScript passes params by parameter name
// (function main(a, b) gets params.a, params.b), or the whole object to a
// function of one destructured parameter (function main({a, b})); an
// unknown key is a TypeError, as in Python. JavaScript code runs as a
// script (not a module) with require available; a named entry point may be
// any global binding (const main = (a) => …). Async functions and returned
// promises are awaited (Python: asyncio.run).
//
// # Concurrency
//
// An Executor is safe for concurrent use. At most Options.Concurrency
// calls (executions and lints) run at once; the next waits up to
// Options.QueueTimeout for a slot, then is answered busy. Execute never
// panics and always returns: the run is bounded by the request's timeout,
// enforced by the Engine, with a backstop of 10 s more in the package.
package function
