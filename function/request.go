package function

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/execbox/execbox/sandbox"
)

// The protocol's bounds.
const (
	MaxCode   = 64 * sandbox.KiB  // bytes of code
	MaxInput  = 128 * sandbox.KiB // bytes of the request as the runner gets it
	MaxResult = 256 * sandbox.KiB // bytes of the serialised return value
	MaxStdout = 8 * sandbox.KiB   // bytes of the function's output kept

	// MaxEntrypoint bounds an entry point name.
	MaxEntrypoint = 255
	// maxSelector bounds the pass-through backend/tier strings.
	maxSelector = 64
)

// Timeout bounds.
const (
	DefaultTimeout = 15 * time.Second
	MinTimeout     = 1 * time.Second
	MaxTimeout     = 60 * time.Second
)

// Mode says what to do with the code.
type Mode string

const (
	ModeExecute Mode = "execute" // run the entry point (the default)
	ModeLint    Mode = "lint"    // parse only, never run
)

// Language names a runner.
type Language string

const (
	Python     Language = "python" // the default
	JavaScript Language = "javascript"
)

// LanguageFor returns the language of a source file by its extension
// (.py; .js, .cjs), for CLIs that lint or run a file.
func LanguageFor(path string) (Language, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".py":
		return Python, true
	case ".js", ".cjs":
		return JavaScript, true
	}
	return "", false
}

// Request is one function call or lint, in the protocol's original form, plus the
// language, a timeout and the engine's selection fields.
type Request struct {
	// Code is the function's source, UTF-8, 1 byte to 64 KiB, not blank.
	Code string `json:"code"`
	// Params is a JSON object passed as keyword arguments (Python) or by
	// parameter name (JavaScript); null or absent means {}.
	Params json.RawMessage `json:"params,omitempty"`
	// Entrypoint names the function to call; empty means the last
	// top-level function of Code.
	Entrypoint string `json:"entrypoint,omitempty"`
	// Mode is execute (default) or lint.
	Mode Mode `json:"mode,omitempty"`
	// Language is python (default) or javascript.
	Language Language `json:"language,omitempty"`
	// Timeout is the wall-clock limit, 1–60 s; zero means the executor's
	// default (15 s unless configured).
	Timeout Duration `json:"timeout,omitzero"`

	// Backend, Tier and MinIsolation are the call's sandbox.Selection,
	// passed to the Engine; this package only checks their shape.
	Backend      string `json:"backend,omitempty"`
	Tier         string `json:"tier,omitempty"`
	MinIsolation string `json:"min_isolation,omitempty"`
}

// Duration is a timeout that JSON gives either as seconds (a number, e.g.
// 15 or 2.5) or as a Go duration string ("1500ms"). It encodes as seconds.
type Duration = sandbox.Seconds

func invalid(format string, args ...any) error {
	return sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidRequest, format, args...)
}

// Validate checks r without running anything. Errors are *sandbox.Error
// with code invalid_request, invalid_code or input_too_large.
func (r *Request) Validate() error {
	switch r.Mode {
	case "", ModeExecute, ModeLint:
	default:
		return invalid("mode %q is not valid (want execute or lint)", r.Mode)
	}
	if l, ok := sandbox.LookupLanguage(string(r.Language)); !ok || !l.Runtime {
		return invalid("language %q is not supported (want %s)", r.Language, strings.Join(sandbox.Languages(true), " or "))
	}
	if t := time.Duration(r.Timeout); t != 0 && (t < MinTimeout || t > MaxTimeout) {
		return invalid("timeout %v is out of range (1s to 60s)", t)
	}
	if err := checkCode(r.Code); err != nil {
		return err
	}
	if err := checkEntrypoint(r.Entrypoint, r.Language); err != nil {
		return err
	}
	if err := checkParams(r.Params); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"backend", r.Backend}, {"tier", r.Tier}, {"min_isolation", r.MinIsolation}} {
		if len(f.v) > maxSelector || strings.ContainsFunc(f.v, func(c rune) bool { return !unicode.IsPrint(c) || c == ' ' }) {
			return invalid("%s %q is not valid", f.name, f.v)
		}
	}
	if r.MinIsolation != "" {
		if _, err := sandbox.ParseIsolation(r.MinIsolation); err != nil {
			return invalid("min_isolation: %v", err)
		}
	}
	in, err := r.Input()
	if err != nil {
		return err
	}
	if len(in) > MaxInput {
		return sandbox.Errorf(sandbox.ErrLimit, CodeInputTooLarge, "function input exceeds 128 KiB (%d bytes)", len(in))
	}
	return nil
}

func checkCode(code string) error {
	if strings.TrimSpace(code) == "" || len(code) > MaxCode {
		return sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidCode, "code must not be empty or exceed 64 KiB")
	}
	if !utf8.ValidString(code) {
		return sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidCode, "code must be valid UTF-8")
	}
	if strings.IndexByte(code, 0) >= 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidCode, "code must not contain NUL bytes")
	}
	return nil
}

// checkEntrypoint allows identifiers only: letters, digits (not first) and
// '_', plus '$' in JavaScript. The JavaScript runner evaluates the name, so
// this check is what keeps it a name.
func checkEntrypoint(name string, lang Language) error {
	if name == "" {
		return nil
	}
	if len(name) > MaxEntrypoint || !utf8.ValidString(name) {
		return invalid("entrypoint is not a valid function name")
	}
	for i, c := range name {
		ok := c == '_' || unicode.IsLetter(c) || (c == '$' && lang == JavaScript) ||
			(i > 0 && (unicode.IsDigit(c) || unicode.In(c, unicode.Mn, unicode.Mc, unicode.Pc)))
		if !ok {
			return invalid("entrypoint %q is not a valid function name", name)
		}
	}
	return nil
}

func checkParams(p json.RawMessage) error {
	t := bytes.TrimSpace(p)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return invalid("params must be a JSON object")
	}
	return nil
}

// runnerInput is the document a runner reads on stdin: the protocol's request.
type runnerInput struct {
	Code       string          `json:"code"`
	Params     json.RawMessage `json:"params"`
	Entrypoint string          `json:"entrypoint"`
	Mode       Mode            `json:"mode"`
}

// Input encodes what the runner reads on its stdin; its size is the "input" of the
// 128 KiB bound.
func (r *Request) Input() ([]byte, error) {
	params := json.RawMessage(bytes.TrimSpace(r.Params))
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	mode := r.Mode
	if mode == "" {
		mode = ModeExecute
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(runnerInput{Code: r.Code, Params: params, Entrypoint: r.Entrypoint, Mode: mode}); err != nil {
		return nil, invalid("encoding the request: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ReadRequest decodes one request from r, reading at most MaxInput+1 bytes:
// more is input_too_large. Unknown fields and trailing data are
// invalid_request. The request is validated.
func ReadRequest(r io.Reader) (*Request, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, invalid("reading the request: %v", err)
	}
	return DecodeRequest(b)
}

// DecodeRequest decodes and validates one request held in b.
func DecodeRequest(b []byte) (*Request, error) {
	if len(b) > MaxInput {
		return nil, sandbox.Errorf(sandbox.ErrLimit, CodeInputTooLarge, "function input exceeds 128 KiB")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return nil, invalid("decoding the request: %v", plain(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("decoding the request: unexpected data after the JSON object")
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return &req, nil
}

// plain drops encoding/json's "json: " prefix for people.
func plain(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }
