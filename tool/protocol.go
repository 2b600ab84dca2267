package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/execbox/execbox/sandbox"
)

// Bounds of the protocol between Set and the runtime.
const (
	// protocolOutput is the runtime's stdout bound (the sandbox's Output
	// limit): a result of MaxResult escaped, or a full list, fits.
	protocolOutput = 2 * sandbox.MiB
	// MaxResult bounds a tool's serialised return value, in bytes.
	MaxResult = 1 * sandbox.MiB
	// MaxOutput bounds Response.Output, in bytes.
	MaxOutput = 64 * sandbox.KiB

	maxTools       = 256
	maxProblems    = 512
	maxDescription = 16 * sandbox.KiB // the runtime allows 4096 characters
	maxParameters  = 64 * sandbox.KiB
	maxMessage     = 16 * sandbox.KiB // the runtime keeps 4096 characters
	maxTraceback   = 64 * sandbox.KiB // the runtime keeps 16384 characters
	maxType        = 256
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	codeRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// The runtime's answers. A list: {"ok": true, "tools": [spec…],
// "problems": [problem…]}. A run: {"ok": true, "result": …} or {"ok":
// false, "error": {code, type, message, traceback}} for the tool's own
// failure. Either: {"ok": false, "failure": {code, message}} when the
// runtime refused before any tool code ran.
type (
	wireList struct {
		OK       *bool         `json:"ok"`
		Tools    *[]wireSpec   `json:"tools"`
		Problems []wireProblem `json:"problems"`
		Failure  *wireFailure  `json:"failure"`
	}
	wireSpec struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Source      string          `json:"source"`
	}
	wireProblem struct {
		Name    string `json:"name"`
		Source  string `json:"source"`
		Message string `json:"message"`
	}
	wireRun struct {
		OK      *bool           `json:"ok"`
		Result  json.RawMessage `json:"result"`
		Error   *wireError      `json:"error"`
		Failure *wireFailure    `json:"failure"`
	}
	wireError struct {
		Code      string `json:"code"`
		Type      string `json:"type"`
		Message   string `json:"message"`
		Traceback string `json:"traceback"`
	}
	wireFailure struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
)

// decodeOne decodes out, which must be exactly one JSON document with no
// unknown fields, into v.
func decodeOne(out []byte, v any) error {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return badOutput("the runtime wrote no answer")
	}
	if !json.Valid(out) {
		return badOutput("the answer is not one JSON document")
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badOutput("%v", err)
	}
	return nil
}

// decodeList checks a list answer; a failure is the runtime's refusal.
func decodeList(out []byte) (*wireList, error) {
	var w wireList
	if err := decodeOne(out, &w); err != nil {
		return nil, err
	}
	switch {
	case w.OK == nil:
		return nil, badOutput("ok is missing")
	case !*w.OK:
		return nil, refusal(w.Failure)
	case w.Tools == nil:
		return nil, badOutput("tools are missing")
	case w.Failure != nil:
		return nil, badOutput("a success carries a failure")
	case len(*w.Tools) > maxTools:
		return nil, badOutput("more than %d tools", maxTools)
	case len(w.Problems) > maxProblems:
		return nil, badOutput("more than %d problems", maxProblems)
	}
	for _, t := range *w.Tools {
		switch {
		case !nameRE.MatchString(t.Name):
			return nil, badOutput("tool name %q is not valid", clip(t.Name, 80))
		case t.Description == "" || len(t.Description) > maxDescription:
			return nil, badOutput("tool %s: the description is empty or over %d bytes", t.Name, maxDescription)
		case len(t.Parameters) == 0 || t.Parameters[0] != '{' || len(t.Parameters) > maxParameters:
			return nil, badOutput("tool %s: parameters are not a JSON object of at most %d bytes", t.Name, maxParameters)
		}
	}
	for i, p := range w.Problems {
		if p.Message == "" || len(p.Name) > 256 { // 64 characters of a file name
			return nil, badOutput("problem %d lacks a message or has an over-long name", i)
		}
		w.Problems[i].Message, _ = capText(p.Message, maxMessage)
	}
	return &w, nil
}

// decodeRun checks a run answer; a failure is the runtime's refusal.
func decodeRun(out []byte) (*wireRun, error) {
	var w wireRun
	if err := decodeOne(out, &w); err != nil {
		return nil, err
	}
	switch {
	case w.OK == nil:
		return nil, badOutput("ok is missing")
	case *w.OK && (w.Result == nil || w.Error != nil || w.Failure != nil):
		return nil, badOutput("a success needs a result and nothing else")
	case *w.OK && len(w.Result) > MaxResult:
		return nil, badOutput("the result exceeds %d bytes", MaxResult)
	case *w.OK:
		return &w, nil
	case w.Failure != nil && (w.Error != nil || w.Result != nil):
		return nil, badOutput("a failure carries an error or a result")
	case w.Failure != nil:
		return nil, refusal(w.Failure)
	case w.Error == nil || w.Result != nil:
		return nil, badOutput("a failure needs an error and no result")
	case !codeRE.MatchString(w.Error.Code):
		return nil, badOutput("error code %q is not valid", clip(w.Error.Code, 80))
	}
	e := w.Error
	e.Message, _ = capText(e.Message, maxMessage)
	e.Type, _ = capText(e.Type, maxType)
	e.Traceback, _ = capText(e.Traceback, maxTraceback)
	if e.Message == "" {
		e.Message = e.Code
	}
	return &w, nil
}

// refusal turns the runtime's failure into the error of its kind.
func refusal(f *wireFailure) error {
	if f == nil || !codeRE.MatchString(f.Code) || f.Message == "" {
		return badOutput("a failure needs a code and a message")
	}
	msg, _ := capText(f.Message, maxMessage)
	switch f.Code {
	case "tool_not_found":
		return sandbox.Errorf(sandbox.ErrNotFound, CodeNotFound, "%s", msg)
	case "tool_invalid":
		return sandbox.Errorf(sandbox.ErrInvalid, CodeToolInvalid, "%s", msg)
	case "args_invalid":
		return sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "%s", msg)
	case "args_too_large":
		return sandbox.Errorf(sandbox.ErrLimit, CodeArgsTooLarge, "%s", msg)
	}
	return sandbox.Errorf(sandbox.ErrInternal, CodeSandboxFailed, "the tool runtime refused (%s): %s", f.Code, msg)
}

func badOutput(format string, args ...any) error {
	return sandbox.Errorf(sandbox.ErrInternal, CodeOutputInvalid, "the tool runtime's answer is invalid: %s", fmt.Sprintf(format, args...))
}

// capText cuts s to at most n bytes on a rune boundary and makes it valid
// UTF-8.
func capText(s string, n int) (string, bool) {
	cut := len(s) > n
	if cut {
		s = s[:n]
		for len(s) > 0 {
			if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
				break
			}
			s = s[:len(s)-1] // part of a rune cut in two
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD"), cut
}

func clip(s string, n int) string {
	c, _ := capText(s, n)
	return c
}
