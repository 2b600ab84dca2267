package errmap

import (
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

// ExitCode maps err to the CLI's exit code: 0 for nil, else ExitRefused.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	return ExitRefused
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

// FunctionCodes lists the function protocol's error codes, sorted.
func FunctionCodes() []string {
	return slices.Sorted(maps.Keys(functionKinds))
}
