package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/auth"
	"github.com/execbox/execbox/sandbox"
)

// access says who may call a route.
type access int

const (
	public access = iota // no token needed
	token                // a valid token (or anonymous when none is configured)
	admin                // an admin token
)

type route struct {
	method, path string
	access       access
	h            http.HandlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"POST", "/v1/runs", token, s.handleRun},
		{"POST", "/v1/functions:execute", token, s.handleFunction(v1.OpFunction)},
		{"POST", "/v1/functions:lint", token, s.handleFunction(v1.OpLint)},
		{"GET", "/v1/health", token, s.handleHealth},
		{"GET", "/v1/backends", token, s.handleBackends},
		{"GET", "/v1/audit", admin, s.handleAudit},
		{"GET", "/v1/openapi.json", public, s.handleOpenAPI},
		{"GET", "/healthz", public, s.handleHealthz},
		{"GET", "/readyz", public, s.handleReadyz},
		{"GET", "/metrics", public, s.metrics.Handler().ServeHTTP},
	}
}

func (s *Server) mux() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	for _, rt := range s.routes {
		mux.Handle(rt.method+" "+rt.path, s.guard(rt))
		allow[rt.path] = append(allow[rt.path], rt.method)
	}
	// The same paths without a method: the wrong method, as a problem.
	for path, methods := range allow {
		slices.Sort(methods)
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeProblem(w, r, v1.ProblemFor(http.StatusMethodNotAllowed, v1.CodeMethodNotAllowed,
				"%s is not allowed on %s (allowed: %s)", r.Method, path, strings.Join(methods, ", ")))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, v1.ProblemFor(http.StatusNotFound, v1.CodeNotFound, "no such route: %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
	})
	return s.wrap(mux)
}

// guard authenticates a route's caller and puts the identity in the
// request's info.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		if rt.access != public {
			id, err := s.auth.Authenticate(r.Header.Get("Authorization"))
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="execbox"`)
				writeProblem(w, r, v1.NewProblem(err))
				return
			}
			info.identity = id
			if rt.access == admin && !id.Admin {
				what := "token " + id.Name + " is not an admin token"
				if !s.auth.Enabled() {
					what = "no token is configured; this route needs an admin token (EXECBOX_TOKEN or auth.tokens with :admin)"
				}
				writeProblem(w, r, v1.ProblemFor(http.StatusForbidden, v1.CodeForbidden, "%s", what))
				return
			}
		}
		rt.h(w, r)
	})
}

// info is what the logging middleware learns about a request.
type info struct {
	id       string
	identity *auth.Identity
	attrs    []slog.Attr
}

type infoKey struct{}

func infoOf(ctx context.Context) *info {
	if i, ok := ctx.Value(infoKey{}).(*info); ok {
		return i
	}
	return &info{}
}

// wrap adds, outermost first: the handler count for Serve, a request id,
// panic recovery, one log line and one metric per request.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		start := time.Now()
		in := &info{id: requestID(r.Header.Get("X-Request-Id"))}
		w.Header().Set("X-Request-Id", in.id)
		r = r.WithContext(context.WithValue(r.Context(), infoKey{}, in))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "request_id", in.id, "panic", fmt.Sprint(p))
				if !sw.wrote {
					writeProblem(sw, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrInternal, "internal", "internal error (request %s)", in.id)))
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			s.metrics.Request(route, sw.status())
			attrs := []slog.Attr{
				slog.String("request_id", in.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", sw.status()), slog.Int64("bytes", sw.bytes), slog.Duration("duration", time.Since(start)),
			}
			if in.identity != nil {
				attrs = append(attrs, slog.String("token", in.identity.Name))
			}
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", append(attrs, in.attrs...)...)
		}()
		next.ServeHTTP(sw, r)
	})
}

// requestID keeps a caller's id when it is short and plain, else makes one.
func requestID(h string) string {
	if h != "" && len(h) <= 64 && !strings.ContainsFunc(h, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) {
		return h
	}
	return sandbox.NewID()
}

// statusWriter records the status and size of an answer and passes
// Flush through (streams need it).
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
