package sandbox

import (
	"errors"
	"fmt"
)

// Kind is one of the few error classes every transport knows how to map
// (package errmap maps them to HTTP statuses, CLI exit codes and more). A
// kind carries only its stable code.
type Kind struct{ code string }

func (k *Kind) Error() string { return k.code }

// Code is the kind's stable machine code, e.g. "invalid".
func (k *Kind) Code() string { return k.code }

// The error kinds. Check with errors.Is(err, sandbox.ErrInvalid).
var (
	ErrInvalid     = &Kind{"invalid"}     // the request is wrong; retrying it cannot help
	ErrUnavailable = &Kind{"unavailable"} // the isolation or service asked for is not there now
	ErrBusy        = &Kind{"busy"}        // no capacity now; retry later
	ErrLimit       = &Kind{"limit"}       // a size or time bound was passed
	ErrNotFound    = &Kind{"not_found"}   // no such sandbox, file or resource
	ErrDenied      = &Kind{"denied"}      // policy forbids it
	ErrInternal    = &Kind{"internal"}    // a fault of execbox or of the host
)

// Kinds lists every kind, most specific first.
func Kinds() []*Kind {
	return []*Kind{ErrInvalid, ErrUnavailable, ErrBusy, ErrLimit, ErrNotFound, ErrDenied, ErrInternal}
}

// Error is a typed execbox error: a kind, a specific stable code and a
// message for people. The cause, if any, is part of Msg and reachable with
// errors.Is / errors.As.
type Error struct {
	Kind *Kind
	Code string // stable, snake_case, specific (e.g. "path_invalid")
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Errorf makes an *Error of kind with a specific code and a formatted
// message; a %w verb in format becomes the cause.
func Errorf(kind *Kind, code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Code: code, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// KindOf returns the kind of err, ErrInternal when it has none, nil for nil.
func KindOf(err error) *Kind {
	if err == nil {
		return nil
	}
	for _, k := range Kinds() {
		if errors.Is(err, k) {
			return k
		}
	}
	return ErrInternal
}

// CodeOf returns the most specific stable code of err: the Code of the
// outermost *Error, else the kind's code.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return KindOf(err).Code()
}
