package v1

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// FunctionRequest is the body of POST /v1/functions:execute and
// /v1/functions:lint: the function protocol's request. Only Code is
// required.
type FunctionRequest struct {
	// Code is the function's source (at most 64 KiB).
	Code string
	// Params is a JSON object passed as keyword arguments (Python) or by
	// parameter name (JavaScript); empty means {}.
	Params json.RawMessage
	// Entrypoint names the function to call; empty means the last
	// top-level function of Code.
	Entrypoint string
	// Mode is execute (the default) or lint; /v1/functions:lint ignores it.
	Mode string
	// Language is python (the default) or javascript.
	Language string
	// Timeout is the wall-clock limit, 1 s to 60 s; zero means the
	// server's default. JSON gives it in seconds (or as "1500ms").
	Timeout time.Duration
	// Backend, Tier and MinIsolation say where the call may run, as a
	// RunRequest's do.
	Backend      string
	Tier         string
	MinIsolation string
}

// functionRequestJSON is FunctionRequest's JSON form.
type functionRequestJSON struct {
	Code         string          `json:"code"`
	Params       json.RawMessage `json:"params,omitempty"`
	Entrypoint   string          `json:"entrypoint,omitempty"`
	Mode         string          `json:"mode,omitempty"`
	Language     string          `json:"language,omitempty"`
	Timeout      Seconds         `json:"timeout,omitzero"`
	Backend      string          `json:"backend,omitempty"`
	Tier         string          `json:"tier,omitempty"`
	MinIsolation string          `json:"min_isolation,omitempty"`
}

// MarshalJSON encodes r with the timeout in seconds. It leaves HTML
// characters as they are; an encoder that escapes them still does.
func (r FunctionRequest) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(functionRequestJSON{
		Code: r.Code, Params: r.Params, Entrypoint: r.Entrypoint, Mode: r.Mode, Language: r.Language,
		Timeout: Seconds(r.Timeout), Backend: r.Backend, Tier: r.Tier, MinIsolation: r.MinIsolation,
	}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON decodes r, refusing unknown fields as the server does.
func (r *FunctionRequest) UnmarshalJSON(b []byte) error {
	var w functionRequestJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*r = FunctionRequest{
		Code: w.Code, Params: w.Params, Entrypoint: w.Entrypoint, Mode: w.Mode, Language: w.Language,
		Timeout: time.Duration(w.Timeout), Backend: w.Backend, Tier: w.Tier, MinIsolation: w.MinIsolation,
	}
	return nil
}

// Seconds is a duration given as seconds (a number, e.g. 2.5) or as a
// duration string ("1500ms"); it encodes as seconds.
type Seconds = sandbox.Seconds

// FunctionResponse is the answer to a function call or a lint: {ok, data}
// or {ok: false, error, code}.
type FunctionResponse struct {
	OK bool `json:"ok"`
	// Data is the return value as JSON (present, possibly null, when OK);
	// a lint's diagnostics in a lint.
	Data json.RawMessage `json:"data,omitempty"`
	// Error is the failure for people; for user_error the exception's
	// message verbatim.
	Error string `json:"error,omitempty"`
	// Code is the stable error code.
	Code string `json:"code,omitempty"`
	// Type is the exception class of a user_error ("ZeroDivisionError").
	Type string `json:"type,omitempty"`
	// Traceback is the stack of the failure, limited to the user's code.
	Traceback string `json:"traceback,omitempty"`
	// Diagnostics are a lint's findings: [] for valid code; absent outside
	// a lint.
	Diagnostics []Diagnostic `json:"diagnostics,omitzero"`
	// Stdout is what the function printed (at most 8 KiB);
	// StdoutTruncated says more was dropped.
	Stdout          string `json:"stdout,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	// DurationMS is how long the call ran, sandbox set-up included.
	DurationMS int64 `json:"duration_ms"`
	// Backend and Isolation say what really ran the code (absent when
	// nothing ran).
	Backend   string `json:"backend,omitempty"`
	Isolation string `json:"isolation,omitempty"`
}

// Err returns nil for a successful response, else a *sandbox.Error with
// the response's code, of the code's kind, and its message.
func (r *FunctionResponse) Err() error {
	if r == nil {
		return sandbox.Errorf(sandbox.ErrInternal, "internal_error", "no response")
	}
	if r.OK {
		return nil
	}
	kind, ok := errmap.FunctionKind(r.Code)
	if !ok {
		kind = sandbox.ErrInternal
	}
	return sandbox.Errorf(kind, r.Code, "%s", r.Error)
}

// Diagnostic is one lint finding. Lines are 1-based; columns are 0-based
// offsets in UTF-16 code units, the end exclusive.
type Diagnostic struct {
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"endLine"`
	EndColumn int    `json:"endColumn"`
	Message   string `json:"message"`
	Type      string `json:"type"` // "error"
}

// Ran reports whether a function response code is one of a call whose
// code ran and failed by itself (it raised, did not parse, timed out, …).
// Such a call is answered 200 with {"ok": false, "code": …}; every other
// failure is a problem document with the code's status.
func Ran(code string) bool { return ranCodes[code] }

var ranCodes = map[string]bool{
	"user_error": true, "syntax_error": true, "entrypoint_not_found": true,
	"result_invalid": true, "result_too_large": true, "timeout": true,
	"memory_limit": true, "output_invalid": true, "response_invalid": true,
}
