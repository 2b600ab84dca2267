package function

import (
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/execbox/execbox/errmap"

	"github.com/execbox/execbox/sandbox"
)

// The stable error codes of Response.Code. The first group is the protocol's original
// failure table; then the failures of the user's code; then the rest.
const (
	CodeInvalidCode          = "invalid_code"          // code empty, blank, over 64 KiB, not UTF-8 or with NUL
	CodeInputTooLarge        = "input_too_large"       // the request is over 128 KiB
	CodeBusy                 = "busy"                  // every slot taken (and the queue wait passed)
	CodeTimeout              = "timeout"               // the time limit passed; the process tree was killed
	CodeSandboxFailed        = "sandbox_failed"        // the sandbox failed to start or run the runner
	CodeIsolationUnavailable = "isolation_unavailable" // the isolation asked for is not there; nothing ran
	CodeOutputInvalid        = "output_invalid"        // the protocol output is empty, unparsable or over its limit
	CodeResponseInvalid      = "response_invalid"      // the output is JSON but not a protocol response
	CodeInterrupted          = "interrupted"           // the caller cancelled

	CodeUserError          = "user_error"           // the function raised; Error is the message, verbatim
	CodeSyntaxError        = "syntax_error"         // the code does not parse (execute mode)
	CodeEntrypointNotFound = "entrypoint_not_found" // no such function, or no function at all
	CodeResultInvalid      = "result_invalid"       // the return value is not strict JSON
	CodeResultTooLarge     = "result_too_large"     // the serialised return value is over 256 KiB

	CodeInvalidRequest = "invalid_request" // a field of the request is not valid
	CodeMemoryLimit    = "memory_limit"    // the sandbox's memory limit killed the function
	CodeDenied         = "denied"          // the engine's policy refused the request
	CodeInternal       = "internal_error"  // a bug in execbox
)

// Codes lists every stable error code.
func Codes() []string { return errmap.FunctionCodes() }

// KindOf returns the error kind of a code (ErrInternal for an unknown one).
func KindOf(code string) *sandbox.Kind {
	if k, ok := errmap.FunctionKind(code); ok {
		return k
	}
	return sandbox.ErrInternal
}

// Response is the protocol's {ok, data | error}, extended. A caller written
// for the original protocol reads ok, data and error and keeps working.
type Response struct {
	OK bool `json:"ok"`
	// Data is the return value as JSON (present, possibly null, when OK).
	// In lint mode it holds the diagnostics, as the protocol's lint has always had it.
	Data json.RawMessage `json:"data,omitempty"`
	// Error is the failure for people; for user_error it is the exception's
	// message verbatim ("division by zero").
	Error string `json:"error,omitempty"`
	// Code is the stable error code (one of the Code… constants).
	Code string `json:"code,omitempty"`
	// Type is the exception class for user_error ("ZeroDivisionError").
	Type string `json:"type,omitempty"`
	// Traceback is the stack of the failure, limited to the user's code.
	Traceback string `json:"traceback,omitempty"`
	// Diagnostics are lint's findings: [] for valid code; absent outside lint.
	Diagnostics []Diagnostic `json:"diagnostics,omitzero"`
	// Stdout is what the function printed or wrote to fds 1 and 2, at most
	// MaxStdout bytes; StdoutTruncated says more was dropped.
	Stdout          string `json:"stdout,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	// DurationMS is how long the run took, sandbox set-up included, any
	// wait for a slot excluded.
	DurationMS int64 `json:"duration_ms"`
	// Backend and Isolation say what really ran the code (absent when
	// nothing ran).
	Backend   string `json:"backend,omitempty"`
	Isolation string `json:"isolation,omitempty"`
	// CPU is the sandbox's CPU time, for the guard's budgets; it is not
	// part of the protocol.
	CPU time.Duration `json:"-"`
}

// Diagnostic is one lint finding, in an editor's shape. Lines
// are 1-based; columns are 0-based offsets in UTF-16 code units (what
// JavaScript editors count), the end exclusive; the range is never empty.
type Diagnostic struct {
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"endLine"`
	EndColumn int    `json:"endColumn"`
	Message   string `json:"message"`
	Type      string `json:"type"` // "error"
}

// Err returns nil for a successful response, else a *sandbox.Error with
// the response's code and message, so transports map it like any error.
func (r *Response) Err() error {
	if r == nil {
		return sandbox.Errorf(sandbox.ErrInternal, CodeInternal, "no response")
	}
	if r.OK {
		return nil
	}
	return sandbox.Errorf(KindOf(r.Code), r.Code, "%s", r.Error)
}

// fail makes a failure response.
func fail(code, msg string) *Response {
	return &Response{Code: code, Error: msg}
}

// ErrorResponse turns an error into a failure response: an error carrying
// one of this package's codes keeps it; other errors are mapped by kind.
func ErrorResponse(err error) *Response {
	if err == nil {
		return fail(CodeInternal, "no error to report")
	}
	return fail(codeOf(err), err.Error())
}

func codeOf(err error) string {
	var e *sandbox.Error
	if errors.As(err, &e) {
		if _, ok := errmap.FunctionKind(e.Code); ok {
			return e.Code
		}
	}
	if sandbox.CodeOf(err) == "isolation_unsupported" {
		// The protocol's one code for "that isolation is not here".
		return CodeIsolationUnavailable
	}
	switch sandbox.KindOf(err) {
	case sandbox.ErrInvalid, sandbox.ErrNotFound:
		return CodeInvalidRequest
	case sandbox.ErrUnavailable:
		return CodeIsolationUnavailable
	case sandbox.ErrBusy:
		return CodeBusy
	case sandbox.ErrDenied:
		return CodeDenied
	default:
		return CodeSandboxFailed
	}
}

// WriteResponse writes r as one line of JSON (no HTML escaping).
func WriteResponse(w io.Writer, r *Response) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
