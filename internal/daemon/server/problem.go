package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// retryAfter is implemented by errors that know when to retry.
type retryAfter interface{ RetryAfter() time.Duration }

// problemOf describes err for the request r.
func problemOf(r *http.Request, err error) *v1.Problem {
	p := v1.NewProblem(err)
	if p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable {
		after := time.Second
		var ra retryAfter
		if errors.As(err, &ra) {
			after = ra.RetryAfter()
		}
		p.RetryAfter = max(1, int(math.Ceil(after.Seconds())))
	}
	return p
}

// writeProblem answers p as application/problem+json. A server-side
// failure's detail never shows the host: an internal error (500, not the
// function protocol's) says only that it happened and where the log has
// it, and any 5xx detail has its absolute paths blanked.
func writeProblem(w http.ResponseWriter, r *http.Request, p *v1.Problem) {
	p.Instance = r.URL.Path
	p.RequestID = infoOf(r.Context()).id
	redactProblem(p)
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.Header().Set("Content-Type", v1.ContentTypeProblem)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(p)
}

// redactProblem keeps the host out of a server-side failure's detail: an
// internal error (500, not the function protocol's) says only that it
// happened and where the log has it; any other 5xx has its absolute paths
// blanked. p.RequestID must be set.
func redactProblem(p *v1.Problem) {
	if p.Status < 500 {
		return
	}
	if _, fn := errmap.FunctionKind(p.Code); p.Status == http.StatusInternalServerError && !fn {
		p.Detail = "internal error: the server's log has the details (request " + p.RequestID + ")"
		return
	}
	p.Detail = redactPaths(p.Detail)
}

// hostPath is an absolute path in a message: a slash after a space, an
// opening bracket, quote, colon or equals sign, or at the start, and what
// follows up to a space, quote, bracket, comma, semicolon or colon.
var hostPath = regexp.MustCompile(`(^|[\s("'=:])/[^\s"'()\[\],;:]*`)

// redactPaths blanks the absolute paths of a message meant for callers:
// where the server keeps things on its host is not theirs to know.
func redactPaths(msg string) string {
	return hostPath.ReplaceAllString(msg, "${1}<path>")
}

// checkJSON refuses a body that is not declared application/json (415),
// also one with no Content-Type at all: a web page can send a body without
// a preflight only as text/plain, a form, or with no type, never as
// application/json (see site.go).
func checkJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return v1.ProblemFor(http.StatusUnsupportedMediaType, v1.CodeUnsupportedMedia, "the request has no Content-Type: want application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return v1.ProblemFor(http.StatusUnsupportedMediaType, v1.CodeUnsupportedMedia, "Content-Type %q is not application/json", ct)
	}
	return nil
}

// readBody reads at most limit bytes of the body (more is left unread for
// the caller's own bound to find) within the body timeout, so a slow
// sender cannot hold a connection and its token's place for long.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	b, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		return nil, s.readError(w, err)
	}
	rc.SetReadDeadline(time.Time{})
	return b, nil
}

// readError describes a failure to read the body. The connection closes
// after the answer: the server must not wait for the rest of the body.
func (s *Server) readError(w http.ResponseWriter, err error) error {
	w.Header().Set("Connection", "close")
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return v1.ProblemFor(http.StatusRequestTimeout, v1.CodeBodyTimeout, "reading the request body took longer than %s", s.opts.BodyTimeout)
	}
	return invalidField("", "reading the request body: %v", err)
}

// decodeJSON reads one JSON document of at most limit bytes into v,
// within the body timeout, strictly: keys exactly as named (case
// included), none given twice, no unknown field, no trailing data.
// Errors are problems: 413 over the limit, 415 not JSON, 408 too slow, 400
// naming the field.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if err := checkJSON(r); err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return s.decodeError(w, err, limit)
	}
	rc.SetReadDeadline(time.Time{})
	if err := checkStrict(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return s.decodeError(w, err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidField("", "unexpected data after the JSON object")
	}
	return nil
}

func invalidField(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	p := v1.ProblemFor(http.StatusBadRequest, v1.CodeInvalidRequest, "%s", msg)
	p.Field = field
	return p
}

func (s *Server) decodeError(w http.ResponseWriter, err error, limit int64) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return s.readError(w, err)
	}
	var mb *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &mb):
		return v1.ProblemFor(http.StatusRequestEntityTooLarge, v1.CodeBodyTooLarge, "the request body exceeds %d bytes (server.max_body)", limit)
	case errors.Is(err, io.EOF):
		return invalidField("", "the body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidField("", "the body ends inside the JSON object")
	case errors.As(err, &syn):
		return invalidField("", "the body is not valid JSON at byte %d: %v", syn.Offset, plain(err))
	case errors.As(err, &b64):
		return invalidField("", "a base64 field (files, stdin_base64) is not valid base64: %v", err)
	case errors.As(err, &typ):
		if typ.Type.PkgPath() == reflect.TypeFor[sandbox.Limits]().PkgPath() {
			// The contract's JSON types (a limit's duration or size)
			// explain themselves.
			return invalidField(typ.Field, "%s", typ.Value)
		}
		return invalidField(typ.Field, "want a JSON %s, got %s", jsonKind(typ.Type), typ.Value)
	}
	msg := plain(err)
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		f = strings.Trim(f, `"`)
		return invalidField(f, "unknown field")
	}
	// A field's own UnmarshalJSON (sizes, durations) failed.
	return invalidField("", "%s", msg)
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

func plain(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }
