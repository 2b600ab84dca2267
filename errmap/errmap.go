package errmap

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"

	"github.com/execbox/execbox/sandbox"
)

// CodeUnauthenticated is the one code whose status is not its kind's: a
// missing or unknown credential is 401, other refusals 403.
const CodeUnauthenticated = "unauthenticated"

var statusOfKind = map[*sandbox.Kind]int{
	sandbox.ErrInvalid:     http.StatusBadRequest,
	sandbox.ErrUnavailable: http.StatusServiceUnavailable,
	sandbox.ErrBusy:        http.StatusTooManyRequests,
	sandbox.ErrLimit:       http.StatusRequestEntityTooLarge,
	sandbox.ErrNotFound:    http.StatusNotFound,
	sandbox.ErrDenied:      http.StatusForbidden,
	sandbox.ErrInternal:    http.StatusInternalServerError,
}

// HTTPStatus is the status a transport answers err with: its kind's, or
// 401 for CodeUnauthenticated.
func HTTPStatus(err error) int {
	if sandbox.CodeOf(err) == CodeUnauthenticated {
		return http.StatusUnauthorized
	}
	return statusOfKind[sandbox.KindOf(err)]
}

// KindOfStatus maps an HTTP status back to a kind, for clients reading an
// error answer without a code they know. 401 and 403 are denied; any
// status not listed is internal.
func KindOfStatus(status int) *sandbox.Kind {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType, http.StatusRequestTimeout:
		return sandbox.ErrInvalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return sandbox.ErrDenied
	case http.StatusNotFound:
		return sandbox.ErrNotFound
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		return sandbox.ErrLimit
	case http.StatusTooManyRequests:
		return sandbox.ErrBusy
	case http.StatusServiceUnavailable:
		return sandbox.ErrUnavailable
	}
	return sandbox.ErrInternal
}

// ExitRefused is the CLI's exit code when execbox itself failed or
// refused, whatever the kind (like `docker run`'s 125); a program that ran
// exits with its own code.
const ExitRefused = 125

// ExitCode maps err to the CLI's exit code: 0 for nil; for an error that
// says the program cannot be started (code "program_not_found" or
// "program_not_executable", from a backend that reports it as an error
// rather than as a Result) the shell's 127 or 126, as ResultExitCode gives
// for such a Result; ExitCanceled when the caller cancelled (an
// interrupt during the health probe); else ExitRefused.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return ExitCanceled
	case sandbox.CodeOf(err) == CodeProgramNotFound:
		return sandbox.ExitNotFound
	case sandbox.CodeOf(err) == CodeProgramNotExecutable:
		return sandbox.ExitNotExecutable
	}
	return ExitRefused
}

// The error codes of a program that cannot be started, where a backend
// returns an error instead of a Result with exit code 127 or 126 (the rule
// of package sandbox).
const (
	CodeProgramNotFound      = "program_not_found"
	CodeProgramNotExecutable = "program_not_executable"
)

// Exit codes of a run, like `docker run` and `timeout` (see ResultExitCode).
const (
	ExitTimeout  = 124 // the wall-clock limit ended it
	ExitCanceled = 130 // the caller cancelled (as after SIGINT)
)

// ResultExitCode is the CLI's exit code for a program that ran: its own
// exit status (sandbox.ExitNotFound, 127, and sandbox.ExitNotExecutable,
// 126, for one that could not be started; also when the pids limit
// refused it a fork); ExitTimeout when the wall-clock limit ended it; ExitRefused
// when the sandbox failed around it; ExitCanceled when the caller
// cancelled; 128+N when signal N ended it; ExitRefused for any other end
// with no exit status (an output limit kill without a recorded signal).
func ResultExitCode(res *sandbox.Result) int {
	switch {
	case res.Reason == sandbox.ReasonTimeout:
		return ExitTimeout
	case res.Reason == sandbox.ReasonSandboxError:
		return ExitRefused
	case res.Reason == sandbox.ReasonCanceled:
		return ExitCanceled
	case res.Signal != "":
		if n, ok := signalNumbers[res.Signal]; ok {
			return 128 + n
		}
		return ExitRefused
	case res.Reason == sandbox.ReasonExited, res.Reason == sandbox.ReasonPidsLimit:
		// A refused fork ends nothing by itself: the program's own code
		// (the limit is named in Reason and Message).
		return res.ExitCode
	default:
		return ExitRefused
	}
}

// signalNumbers are Linux's signal numbers by name, for 128+N; a table
// because the standard library has no name → number lookup.
var signalNumbers = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8,
	"SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15,
	"SIGSTKFLT": 16, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGTTIN": 21, "SIGTTOU": 22,
	"SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25, "SIGVTALRM": 26, "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29,
	"SIGPWR": 30, "SIGSYS": 31,
}

// functionKinds maps every error code of the function protocol (the
// function package's Code… constants) to its kind.
var functionKinds = map[string]*sandbox.Kind{
	"invalid_code":          sandbox.ErrInvalid,
	"input_too_large":       sandbox.ErrLimit,
	"busy":                  sandbox.ErrBusy,
	"timeout":               sandbox.ErrLimit,
	"sandbox_failed":        sandbox.ErrInternal,
	"isolation_unavailable": sandbox.ErrUnavailable,
	"output_invalid":        sandbox.ErrInternal,
	"response_invalid":      sandbox.ErrInternal,
	"interrupted":           sandbox.ErrInternal,
	"user_error":            sandbox.ErrInvalid,
	"syntax_error":          sandbox.ErrInvalid,
	"entrypoint_not_found":  sandbox.ErrInvalid,
	"result_invalid":        sandbox.ErrInvalid,
	"result_too_large":      sandbox.ErrLimit,
	"invalid_request":       sandbox.ErrInvalid,
	"memory_limit":          sandbox.ErrLimit,
	"denied":                sandbox.ErrDenied,
	"internal_error":        sandbox.ErrInternal,
}

// FunctionKind returns the kind of a function protocol error code; ok is
// false for a code that is not one.
func FunctionKind(code string) (k *sandbox.Kind, ok bool) {
	k, ok = functionKinds[code]
	return k, ok
}

// IsFunctionCode reports whether code is one of the function protocol's.
func IsFunctionCode(code string) bool {
	_, ok := functionKinds[code]
	return ok
}

// FunctionCodes lists the function protocol's error codes, sorted.
func FunctionCodes() []string {
	return slices.Sorted(maps.Keys(functionKinds))
}
