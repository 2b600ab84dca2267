package server

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/execbox/execbox/internal/daemon/replica"
	"github.com/execbox/execbox/sandbox"
)

// HeaderForwardedBy names the replica that passed a request on. A request
// carrying it is answered where it lands, never passed again, so two
// replicas that disagree cannot bounce it between them.
const HeaderForwardedBy = "X-Execbox-Forwarded-By"

// owningPeer returns the replica that holds the session a request is
// about, when that is another one this server can pass it to.
func (s *Server) owningPeer(rt route, r *http.Request) (string, bool) {
	if s.opts.Peers == nil || !strings.HasPrefix(rt.path, "/v1/sessions/{id}") || r.Header.Get(HeaderForwardedBy) != "" {
		return "", false
	}
	name, ok := replica.Of(r.PathValue("id"))
	return name, ok && name != s.opts.Replica
}

// forward passes an authenticated request for a session of replica name
// to it, streaming both ways (terminal output and attach included). The
// owner checks the token again and answers; this replica adds nothing
// but the header saying it passed the request.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, name string) {
	base, err := s.opts.Peers.Find(r.Context(), name)
	if errors.Is(err, replica.ErrGone) {
		writeProblem(w, r, problemOf(r, sandbox.Errorf(sandbox.ErrNotFound, "session_not_found",
			"no session %s: replica %s, which held it, is gone", r.PathValue("id"), name)))
		return
	}
	if err != nil {
		s.log.Warn("replica not found", "replica", name, "err", err)
		writeProblem(w, r, problemOf(r, sandbox.Errorf(sandbox.ErrUnavailable, "replica_unreachable",
			"replica %s, which holds session %s, cannot be looked up now", name, r.PathValue("id"))))
		return
	}
	target, err := url.Parse(base)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	id := infoOf(r.Context()).id
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The owner checks the Host the client sent, as this replica did.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(HeaderForwardedBy, s.opts.Replica)
			pr.Out.Header.Set("X-Request-Id", id)
		},
		Transport:     s.peerTransport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("replica did not answer", "replica", name, "err", err)
			writeProblem(w, r, problemOf(r, sandbox.Errorf(sandbox.ErrUnavailable, "replica_unreachable",
				"replica %s, which holds session %s, did not answer", name, r.PathValue("id"))))
		},
	}
	p.ServeHTTP(&deadlineWriter{w, http.NewResponseController(w), s.opts.WriteTimeout}, r)
}

// deadlineWriter gives each piece of a passed-on answer the write timeout,
// as the owner gives each event of a stream: a stream may last as long as
// its run, a client that stops reading is still cut off.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.ResponseWriter.Write(p)
}

func (d *deadlineWriter) Flush() { d.rc.Flush() }

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
