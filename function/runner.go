package function

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The language runners, shipped inside the binary.
var (
	//go:embed runners/runner.py
	pythonRunner string
	//go:embed runners/runner.js
	javascriptRunner string
)

// Bootstraps: short programs passed as one argv element that decode and run
// the embedded runner. They hold only base64 characters, quotes and
// punctuation — no space, $, backtick, backslash or double quote — so no
// shell or Windows argv parser on the way can rewrite them.
var (
	pythonBootstrap     = "exec(__import__('base64').b64decode('" + base64.StdEncoding.EncodeToString([]byte(pythonRunner)) + "').decode())"
	javascriptBootstrap = "eval(Buffer.from('" + base64.StdEncoding.EncodeToString([]byte(javascriptRunner)) + "','base64').toString())"
)

// command is the argv that starts lang's runner: no script file, no shell.
// -I ignores PYTHON* variables and the user site directory and keeps the
// work dir off sys.path; -B writes no .pyc. The system site-packages stay
// importable (no -S) so the sandbox image's libraries can be used.
func command(lang Language, python, node string) []string {
	if lang == JavaScript {
		return []string{node, "-e", javascriptBootstrap}
	}
	return []string{python, "-I", "-B", "-c", pythonBootstrap}
}

// wire is what a runner writes on its stdout: the response without the
// fields only execbox knows (duration, backend, isolation).
type wire struct {
	OK              *bool           `json:"ok"`
	Data            json.RawMessage `json:"data"`
	Error           string          `json:"error"`
	Code            string          `json:"code"`
	Type            string          `json:"type"`
	Traceback       string          `json:"traceback"`
	Stdout          string          `json:"stdout"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	Diagnostics     *[]Diagnostic   `json:"diagnostics"`
}

// runnerCodes are the codes a runner may answer with.
var runnerCodes = map[string]bool{
	CodeUserError: true, CodeSyntaxError: true, CodeEntrypointNotFound: true,
	CodeResultInvalid: true, CodeResultTooLarge: true, CodeOutputInvalid: true, CodeInputTooLarge: true,
}

// Bounds on what a runner may report, in bytes (the runners keep 4 Ki and
// 16 Ki characters of message and traceback).
const (
	maxDiagnostics    = 100
	maxErrorBytes     = 16 * 1024
	maxTracebackBytes = 64 * 1024
)

// decodeOutput turns a runner's protocol output into a Response, refusing
// anything that is not exactly a protocol response.
func decodeOutput(out []byte, mode Mode) *Response {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return fail(CodeOutputInvalid, "function output is invalid or over its limit: the runner wrote no response")
	}
	if !json.Valid(out) {
		return fail(CodeOutputInvalid, "function output is invalid or over its limit: it is not one JSON document")
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var w wire
	if err := dec.Decode(&w); err != nil {
		return badResponse("%s", plain(err))
	}
	switch {
	case w.OK == nil:
		return badResponse("ok is missing")
	case !*w.OK && (w.Error == "" || !runnerCodes[w.Code]):
		return badResponse("a failure needs an error and a known code (got code %q)", w.Code)
	case *w.OK && w.Code != "":
		return badResponse("a success carries no error code")
	}
	r := &Response{OK: *w.OK}
	r.Stdout, r.StdoutTruncated = capText(w.Stdout, MaxStdout)
	r.StdoutTruncated = r.StdoutTruncated || w.StdoutTruncated
	if !r.OK {
		// The runners cut these in characters; bound the bytes here too.
		r.Code = w.Code
		r.Error, _ = capText(w.Error, maxErrorBytes)
		r.Type, _ = capText(w.Type, 256)
		r.Traceback, _ = capText(w.Traceback, maxTracebackBytes)
		return r
	}
	if mode == ModeLint {
		if w.Diagnostics == nil {
			return badResponse("diagnostics are missing")
		}
		d := *w.Diagnostics
		if len(d) > maxDiagnostics {
			return badResponse("more than %d diagnostics", maxDiagnostics)
		}
		for _, x := range d {
			if x.Line < 1 || x.Column < 0 || x.EndLine < x.Line || x.EndColumn < 0 || x.Message == "" {
				return badResponse("diagnostic %+v is out of range", x)
			}
		}
		if d == nil {
			d = []Diagnostic{}
		}
		r.Diagnostics = d
		r.Data, _ = json.Marshal(d)
		return r
	}
	if w.Data == nil {
		return badResponse("data is missing")
	}
	if len(w.Data) > MaxResult {
		return fail(CodeResultTooLarge, "result exceeds 256 KiB")
	}
	r.Data = w.Data
	return r
}

func badResponse(format string, args ...any) *Response {
	return fail(CodeResponseInvalid, "function response is not a valid response: "+fmt.Sprintf(format, args...))
}

// capText cuts s to at most n bytes on a rune boundary.
func capText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	s = s[:n]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // part of a rune cut in two
	}
	return s, true
}
