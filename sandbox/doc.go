// Package sandbox is execbox's one contract between the engine and the
// isolation technologies (backends).
//
// A Backend creates Sandboxes. A Sandbox is an isolated environment with its
// own filesystem view (a work dir), limits and network. A one-shot run is
//
//	Create → WriteFiles → Exec → Artifacts → Close
//
// and Run does exactly that. A session keeps the Sandbox and calls Exec again.
//
// Secure by zero value: a zero Spec means no network, a read-only root,
// uid 65534, no capabilities, no_new_privs, seccomp on, every namespace on
// and the default limits of Limits. Relaxing anything takes an explicit field.
//
// Results never lie about what happened: Result.Backend and Result.Isolation
// name what really ran the process, Result.Reason says why it ended, and
// Result.Enforcement names the mechanism that enforced each limit.
//
// Errors carry one of a few kinds (ErrInvalid, ErrUnavailable, ErrBusy,
// ErrLimit, ErrNotFound, ErrDenied, ErrInternal), tested with errors.Is, and a
// stable machine code (CodeOf). Transports map kinds once (HTTPStatus,
// ExitCode).
//
// A program that cannot be started is not an error of Exec: like a shell
// and `docker run`, Exec returns a Result with reason "exited", exit code
// ExitNotFound (127) when the program is not there (not in PATH, no such
// file, or its interpreter missing) and ExitNotExecutable (126) when it is
// there but cannot be executed (a directory, not a regular file, no execute
// permission, an exec format error), with the reason in Result.Message.
// Only a process that is invalid as a request (empty Args, a bad Dir, or a
// Dir that is not a directory in the work dir) is an error (ErrInvalid).
//
// Concurrency: a Backend is safe for concurrent use. A Sandbox is safe for
// concurrent use too, with one rule: it runs one Exec at a time. An Exec
// started while another runs fails at once with ErrBusy, code
// "sandbox_busy" (CodeBusy), and runs nothing; Lifecycle enforces this for
// every implementation that registers its Execs with BeginExec. WriteFiles
// and Artifacts may run while an Exec runs and alongside each other: the
// program and the caller share the work dir, so they see whatever the
// program has written so far, and never anything outside the work dir, even
// while the program swaps a directory for a symlink under them. Close may
// be called at any time from any goroutine; it ends a running Exec. Exec
// honours its context: cancelling it kills the whole process tree and
// returns reason "canceled". What must run beside other work (a session's
// contexts and terminals) runs under one Lasting Exec that hosts it: see
// package agent.
package sandbox
