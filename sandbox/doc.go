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
// Concurrency: a Backend is safe for concurrent use. A Sandbox is safe for
// use by one goroutine at a time, except Close, which may be called at any
// time from any goroutine and ends a running Exec. Exec honours its context:
// cancelling it kills the whole process tree and returns reason "canceled".
package sandbox
