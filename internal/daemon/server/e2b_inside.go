package server

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/sandbox"
)

// What the SDKs send into a sandbox: routed by E2b-Sandbox-Port to the
// sandbox daemon's services (49983) or the code interpreter (49999), and
// authenticated by the sandbox's access token, which acts as the token
// that made the sandbox.

// e2bWorkDir is where a sandbox's work dir is seen inside it: the home
// of the SDKs' relative paths and the default cwd.
const e2bWorkDir = "/work"

// e2bKeepalive is how often a quiet stream says it is alive (the SDKs
// ask for at most every 50 s).
const e2bKeepalive = 30 * time.Second

// e2bCall is an in-sandbox request's sandbox, request and writer, for
// the Connect procedures, which see only a context.
type e2bCall struct {
	sb   *e2bSandbox
	sess *engine.Session // open when the call came in
	r    *http.Request
	rc   *http.ResponseController
}

type e2bCallKey struct{}

func e2bCallOf(ctx context.Context) *e2bCall {
	c, _ := ctx.Value(e2bCallKey{}).(*e2bCall)
	return c
}

// extend moves the answer's write deadline on: a stream lives as long as
// it is being read.
func (c *e2bCall) extend(s *Server) {
	c.rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
}

func (s *Server) e2bInside() map[string]http.Handler {
	opts := append(e2b.Codecs(), connect.WithReadMaxBytes(e2bMaxBody))
	envd := http.NewServeMux()
	for _, h := range []struct {
		path string
		h    http.Handler
	}{
		{e2b.ProcessStart, connect.NewServerStreamHandlerSimple(e2b.ProcessStart, s.e2bStart, opts...)},
		{e2b.ProcessConnect, connect.NewServerStreamHandlerSimple(e2b.ProcessConnect, s.e2bAttach, opts...)},
		{e2b.ProcessList, connect.NewUnaryHandlerSimple(e2b.ProcessList, s.e2bProcesses, opts...)},
		{e2b.ProcessSendInput, connect.NewUnaryHandlerSimple(e2b.ProcessSendInput, s.e2bSendInput, opts...)},
		{e2b.ProcessStream, connect.NewClientStreamHandlerSimple(e2b.ProcessStream, s.e2bStreamInput, opts...)},
		{e2b.ProcessSendSignal, connect.NewUnaryHandlerSimple(e2b.ProcessSendSignal, s.e2bSignal, opts...)},
		{e2b.ProcessCloseStdin, connect.NewUnaryHandlerSimple(e2b.ProcessCloseStdin, s.e2bCloseStdin, opts...)},
		{e2b.ProcessUpdate, connect.NewUnaryHandlerSimple(e2b.ProcessUpdate, s.e2bUpdate, opts...)},
		{e2b.FilesystemStat, connect.NewUnaryHandlerSimple(e2b.FilesystemStat, s.e2bStat, opts...)},
		{e2b.FilesystemListDir, connect.NewUnaryHandlerSimple(e2b.FilesystemListDir, s.e2bListDir, opts...)},
		{e2b.FilesystemMakeDir, connect.NewUnaryHandlerSimple(e2b.FilesystemMakeDir, s.e2bMakeDir, opts...)},
		{e2b.FilesystemRemove, connect.NewUnaryHandlerSimple(e2b.FilesystemRemove, s.e2bRemove, opts...)},
		{e2b.FilesystemMove, connect.NewUnaryHandlerSimple(e2b.FilesystemMove, s.e2bMove, opts...)},
		{e2b.FilesystemWatch, connect.NewServerStreamHandlerSimple(e2b.FilesystemWatch, s.e2bWatch, opts...)},
	} {
		envd.Handle(h.path, h.h)
	}
	envd.HandleFunc("GET /files", s.e2bDownload)
	envd.HandleFunc("POST /files", s.e2bUpload)
	envd.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	jupyter := http.NewServeMux()
	jupyter.HandleFunc("POST /execute", s.e2bExecute)
	jupyter.HandleFunc("GET /contexts", s.e2bContexts)
	jupyter.HandleFunc("POST /contexts", s.e2bNewContext)
	jupyter.HandleFunc("POST /contexts/{id}/restart", s.e2bRestartContext)
	jupyter.HandleFunc("DELETE /contexts/{id}", s.e2bRemoveContext)
	jupyter.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	return map[string]http.Handler{e2b.PortEnvd: envd, e2b.PortJupyter: jupyter}
}

// e2bSandboxCall authenticates an in-sandbox request and routes it by
// port. A sandbox that is not found and a wrong token are answered alike,
// 502 as the service's proxy answers for a sandbox that is gone (the SDKs
// read it so: isRunning is false, a call's error says the sandbox is not
// running).
func (s *Server) e2bSandboxCall(w http.ResponseWriter, r *http.Request, ports map[string]http.Handler) {
	id := r.Header.Get(e2b.HeaderSandboxID)
	info := infoOf(r.Context())
	info.attrs = append(info.attrs, sessionAttr(id))
	tok := r.Header.Get(e2b.HeaderAccessToken)
	if tok == "" {
		tok = r.Header.Get(e2b.HeaderTrafficToken)
	}
	sb, ok := s.e2b.get(id)
	var sess *engine.Session
	if ok && sb.tokenIs(tok) {
		// nil when closed a moment ago and not yet forgotten: gone all the same.
		sess, _ = s.opts.Engine.Session(sb.owner, sb.id)
	}
	if sess == nil {
		s.metrics.AuthFailed("sandbox_not_found")
		writeE2BError(w, http.StatusBadGateway, "sandbox %s not found (or the access token is not its)", id)
		return
	}
	h, ok := ports[r.Header.Get(e2b.HeaderSandboxPort)]
	if !ok {
		writeE2BError(w, http.StatusBadGateway, "nothing listens on port %q of sandbox %s: execbox serves the sandbox daemon (%s) and the code interpreter (%s)",
			r.Header.Get(e2b.HeaderSandboxPort), id, e2b.PortEnvd, e2b.PortJupyter)
		return
	}
	info.identity = sb.identity
	r, ok = s.withCall(w, r)
	if !ok {
		return
	}
	defer s.serving(r)()
	if r.URL.Path != e2bPrefix+e2b.ProcessStream {
		// Bodies come at the minimum rate, as the API's do; an input
		// stream is slow and quiet by nature (bounded per message).
		defer paced(w, r).done()
	}
	r = r.WithContext(context.WithValue(r.Context(), e2bCallKey{}, &e2bCall{sb: sb, sess: sess, r: r, rc: http.NewResponseController(w)}))
	r.URL.Path = strings.TrimPrefix(r.URL.Path, e2bPrefix)
	r.URL.RawPath = ""
	// The plain HTTP answers (files, the code interpreter) refuse in the
	// shape the SDKs read; Connect's answer in their own.
	ew := &e2bErrors{ResponseWriter: w}
	h.ServeHTTP(ew, r)
	ew.finish()
}

// e2bErr is err as a Connect error: the problem's detail and code.
func e2bErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	p := e2bProblem(err)
	code := connect.CodeInternal
	switch p.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		code = connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusNotFound:
		code = connect.CodeNotFound
	case http.StatusConflict:
		code = connect.CodeFailedPrecondition
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		code = connect.CodeDeadlineExceeded
	case http.StatusTooManyRequests:
		code = connect.CodeResourceExhausted
	case http.StatusNotImplemented:
		code = connect.CodeUnimplemented
	case http.StatusServiceUnavailable:
		code = connect.CodeUnavailable
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	return connect.NewError(code, errors.New(e2bMessage(msg)+" ("+p.Code+")"))
}

// e2bProblem describes err as the API would, its detail redacted as
// writeProblem redacts it (a server-side failure does not show the host).
func e2bProblem(err error) *v1.Problem {
	p, ok := err.(*v1.Problem)
	if !ok {
		p = v1.NewProblem(err)
	}
	redactProblem(p)
	return p
}

// e2bPath is an SDK's path as a path in the work dir: relative to it, or
// absolute within it. Other paths are refused: execbox's file operations
// reach the work dir only.
func e2bPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if strings.HasPrefix(p, "/") {
		c := path.Clean(p)
		switch {
		case c == e2bWorkDir:
			return "", nil
		case strings.HasPrefix(c, e2bWorkDir+"/"):
			p = strings.TrimPrefix(c, e2bWorkDir+"/")
		default:
			return "", sandbox.Errorf(sandbox.ErrInvalid, "path_outside_work_dir",
				"%s is outside the work dir %s: execbox's file operations reach the work dir only (relative paths are within it)", p, e2bWorkDir)
		}
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" || p == "." {
		return "", nil
	}
	if err := sandbox.CheckPath(p); err != nil {
		return "", err
	}
	return p, nil
}
