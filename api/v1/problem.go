package v1

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// ContentTypeProblem is the media type of an error answer (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// ProblemTypePrefix starts every problem type URI; the stable code follows.
const ProblemTypePrefix = "urn:execbox:error:"

// Codes of this API (besides the sandbox and function codes).
const (
	CodeUnauthenticated  = errmap.CodeUnauthenticated // 401: no or an unknown bearer token
	CodeForbidden        = "forbidden"                // 403: the token may not do this
	CodeNotFound         = "not_found"                // 404: no such route
	CodeMethodNotAllowed = "method_not_allowed"       // 405
	CodeBodyTimeout      = "body_timeout"             // 408: the body came too slowly
	CodeBodyTooLarge     = "body_too_large"           // 413: the body is over server.max_body
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeBusy             = "busy"               // 429: every run slot is taken
	CodeRateLimited      = "rate_limited"       // 429: the token's rate limit
	CodeTooManyInFlight  = "too_many_in_flight" // 429: the token's concurrency limit
	CodeDraining         = "draining"           // 503: the server is shutting down
	CodeInvalidRequest   = "invalid_request"    // 400: a field is not valid
)

// Problem is an RFC 9457 problem document with execbox's extensions. It is
// an error; it unwraps to a *sandbox.Error of its kind.
type Problem struct {
	// Type is ProblemTypePrefix + Code.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Code is the stable machine code.
	Code string `json:"code"`
	// Field names the request field at fault, when one is.
	Field     string `json:"field,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is the Retry-After header's seconds, for 429 and 503.
	RetryAfter int `json:"retry_after,omitempty"`
}

func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Detail
	}
	return fmt.Sprintf("%d %s (%s)", p.Status, p.Title, p.Code)
}

// Unwrap returns the *sandbox.Error the problem stands for, so errors.Is
// with a kind, sandbox.CodeOf and errmap.ExitCode work on it.
func (p *Problem) Unwrap() error {
	return &sandbox.Error{Kind: p.Kind(), Code: p.Code, Msg: p.Error()}
}

// Kind returns the error kind of the problem: the kind of its code when the
// code is a function code, else the kind of its status.
func (p *Problem) Kind() *sandbox.Kind {
	if k, ok := errmap.FunctionKind(p.Code); ok {
		return k
	}
	return errmap.KindOfStatus(p.Status)
}

// NewProblem describes err: status from its kind (401 for
// CodeUnauthenticated), code from sandbox.CodeOf, field from a FieldError.
func NewProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	code := sandbox.CodeOf(err)
	status := errmap.HTTPStatus(err)
	pr := &Problem{Type: ProblemTypePrefix + code, Title: http.StatusText(status), Status: status, Detail: err.Error(), Code: code}
	var fe *FieldError
	if errors.As(err, &fe) {
		pr.Field = fe.Field
	}
	return pr
}

// ProblemFor builds a problem with an explicit status and code.
func ProblemFor(status int, code, format string, args ...any) *Problem {
	return &Problem{Type: ProblemTypePrefix + code, Title: http.StatusText(status), Status: status,
		Detail: fmt.Sprintf(format, args...), Code: code}
}

// CodeOfType returns the code in a problem type URI ("" if it is not one
// of ours).
func CodeOfType(typ string) string {
	c, ok := strings.CutPrefix(typ, ProblemTypePrefix)
	if !ok {
		return ""
	}
	return c
}

// FieldError is an error about one field of a request; Field is its JSON
// path ("limits.memory").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// invalid is an ErrInvalid naming field.
// Invalid is the error of a request field (or query parameter, or header)
// that is not valid: 400 invalid_request naming it.
func Invalid(field, format string, args ...any) error { return invalid(field, format, args...) }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...))}
}
