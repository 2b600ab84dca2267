package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/webui"
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
	metricsAccess := token
	if s.opts.PublicMetrics {
		metricsAccess = public
	}
	return append([]route{
		{"POST", "/v1/runs", token, s.handleRun},
		{"POST", "/v1/functions:execute", token, s.handleFunction(v1.OpFunction)},
		{"POST", "/v1/functions:lint", token, s.handleFunction(v1.OpLint)},
		{"GET", "/v1/health", token, s.handleHealth},
		{"GET", "/v1/backends", token, s.handleBackends},
		{"GET", "/v1/audit", admin, s.handleAudit},
		{"GET", "/v1/events", token, s.handleEvents},
		{"GET", "/v1/openapi.json", public, s.handleOpenAPI},
		{"GET", "/healthz", public, s.handleHealthz},
		{"GET", "/readyz", public, s.handleReadyz},
		{"GET", "/metrics", metricsAccess, s.metrics.Handler().ServeHTTP},
		{"POST", "/mcp", token, s.handleMCP},
	}, slices.Concat(s.sessionRoutes(), s.contextRoutes(), s.toolRoutes(), s.approvalRoutes())...)
}

func (s *Server) mux() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	for _, rt := range s.routes {
		mux.Handle(rt.method+" "+rt.path, s.authenticated(rt))
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
	mux.Handle(e2bPrefix+"/", s.e2bHandler())
	var ui http.Handler
	if s.opts.Playground {
		ui = webui.New()
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if ui != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !apiPath(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		writeProblem(w, r, v1.ProblemFor(http.StatusNotFound, v1.CodeNotFound, "no such route: %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
	})
	return s.wrap(mux)
}

// apiPath says whether an unmatched path is under the API's own, where
// an unknown path is a JSON 404, never a page.
func apiPath(p string) bool {
	for _, prefix := range []string{"/v1", "/healthz", "/readyz", "/metrics", "/mcp", e2bPrefix} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// authenticated wraps a route: it authenticates the caller and puts the
// identity in the request's info (named apart from internal/daemon/guard, which
// decides about calls). A refusal is answered without reading the body; a
// 401 is audited and counted against the caller's address (auth.Check),
// and while an authenticated request is served its connection is not
// evicted by the connection bounds.
func (s *Server) authenticated(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		if rt.access != public {
			id, err := s.auth.Check(hostOnly(r.RemoteAddr), r.Header.Get("Authorization"))
			if err != nil {
				s.authFailed(w, r, err)
				return
			}
			info.identity = id
			if name, ok := s.owningPeer(rt, r); ok {
				defer s.serving(r)()
				s.forward(w, r, name)
				return
			}
			var ok bool
			if r, ok = s.withCall(w, r); !ok {
				return
			}
			if rt.access == admin && !id.Admin {
				what := "token " + id.Name + " is not an admin token"
				if !s.auth.Enabled() {
					what = "no token is configured; this route needs an admin token (EXECBOX_TOKEN or auth.tokens with :admin)"
				}
				writeProblem(w, r, v1.ProblemFor(http.StatusForbidden, v1.CodeForbidden, "%s", what))
				return
			}
			defer s.serving(r)()
		}
		rt.h(w, r)
	})
}

// authFailed answers a refused authentication: 401 or, when the address
// failed too often, 429. A failed authentication — credentials presented
// that match no token — is audited as kind auth with the remote address
// (the failure budget bounds the rows); a request without credentials is
// only counted.
func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(r, err)
	s.metrics.AuthFailed(p.Code)
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="execbox"`)
		if s.opts.Audit != nil && r.Header.Get("Authorization") != "" {
			e := audit.Entry{Record: audit.Record{Time: time.Now(), RequestID: infoOf(r.Context()).id, Operation: audit.OpAuth,
				ErrorCode: p.Code, Remote: hostOnly(r.RemoteAddr)}}
			if _, err := s.opts.Audit.Record(context.WithoutCancel(r.Context()), e); err != nil {
				s.metrics.AuditError()
				s.log.Error("writing the audit log", "request_id", e.RequestID, "err", err)
			}
		}
	}
	writeProblem(w, r, p)
}

// owner is who a run is admitted for: the token when tokens are
// configured (its share of the run slots applies; admin tokens may take
// the reserved ones), else no one.
func (s *Server) owner(id *auth.Identity) engine.Owner {
	if id == nil || !s.auth.Enabled() {
		return engine.Owner{}
	}
	return engine.Owner{Name: id.Name, Privileged: id.Admin}
}

// info is what the logging middleware learns about a request.
type info struct {
	id       string
	identity *auth.Identity
	caller   event.Caller // the X-Execbox-* headers
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
// the security headers, the site checks (Host, Origin, CORS), panic
// recovery, one log line and one metric per request, a write deadline
// from an answer's first byte, and never waiting for a body no one read.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		start := time.Now()
		in := &info{id: requestID(r.Header.Get("X-Request-Id"))}
		securityHeaders(w.Header())
		w.Header().Set("X-Request-Id", in.id)
		rc := http.NewResponseController(w)
		// An earlier answer on this connection left its deadline: this
		// one's starts at its own first byte.
		rc.SetWriteDeadline(time.Time{})
		body := &bodyState{ReadCloser: r.Body, has: r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody}
		r.Body = body
		r = r.WithContext(context.WithValue(r.Context(), infoKey{}, in))
		sw := &statusWriter{ResponseWriter: w, rc: rc, timeout: s.opts.WriteTimeout}
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
			// A body no one read (a refusal before it, a 401, a public
			// route) is not waited for: net/http reads up to 256 KiB of it
			// to keep the connection in step, and with no deadline would
			// wait forever for one that never comes. What has arrived is
			// read at once; past discardTimeout the connection closes.
			// (Larger bodies are not read: net/http half-closes and closes.)
			if body.unread() {
				rc.SetReadDeadline(time.Now().Add(discardTimeout))
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
		if s.checkSite(sw, r) {
			return
		}
		next.ServeHTTP(sw, r)
	})
}

// discardTimeout bounds reading the rest of a body no handler read.
const discardTimeout = time.Second

// bodyState is a request body that knows whether it was read to its end.
type bodyState struct {
	io.ReadCloser
	has bool // the request has a body
	eof atomic.Bool
}

func (b *bodyState) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// unread reports whether the request has a body not read to its end.
func (b *bodyState) unread() bool { return b.has && !b.eof.Load() }

// requestID keeps a caller's id when it is short and plain, else makes one.
func requestID(h string) string {
	if h != "" && len(h) <= 64 && !strings.ContainsFunc(h, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) {
		return h
	}
	return sandbox.NewID()
}

// statusWriter records the status and size of an answer, passes Flush
// through (streams need it) and starts the write deadline at the answer's
// first byte.
type statusWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	code    int
	bytes   int64
	wrote   bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
		w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
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
