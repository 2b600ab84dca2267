package server

import (
	"context"
	"net/http"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// handleHealth is GET /v1/health: the engine's selection report; in full
// for admin tokens, else without what tells about the host (redact).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.health(r))
}

// handleBackends is GET /v1/backends, redacted as /v1/health is.
func (s *Server) handleBackends(w http.ResponseWriter, r *http.Request) {
	out := v1.Backends{Backends: s.health(r).Candidates}
	if out.Backends == nil {
		out.Backends = []v1.Backend{}
	}
	writeJSON(w, http.StatusOK, out)
}

// health is the report r's caller may see.
func (s *Server) health(r *http.Request) v1.Health {
	h := wire.Health(s.opts.Engine.Report(r.Context()))
	if id := infoOf(r.Context()).identity; id == nil || !id.Admin {
		redact(&h)
	}
	return h
}

// redact drops from a health report what tells about the host rather than
// about where a run may go: each backend's details (binaries' paths and
// versions, the cgroup layout), how it enforces each limit, and its
// reason, which becomes a plain state. Names, isolation levels, readiness
// and the selection stay.
func redact(h *v1.Health) {
	for i := range h.Candidates {
		c := &h.Candidates[i]
		c.Details, c.Enforcement = nil, nil
		switch {
		case c.Ready:
			c.Reason = "ready"
		case c.Available:
			c.Reason = "available, not ready"
		default:
			c.Reason = "not available (an admin token sees why)"
		}
	}
	h.SelectedBecause = redactPaths(h.SelectedBecause)
	h.Pools.Reason = redactPaths(h.Pools.Reason)
	for i := range h.Pools.Pools {
		if h.Pools.Pools[i].Error != "" {
			h.Pools.Pools[i].Error = "failing (an admin token sees why)"
		}
	}
}

// handleHealthz is GET /healthz: the process answers.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, v1.Status{OK: true, Draining: s.Draining()})
}

// handleReadyz is GET /readyz: not draining, and the configured selection
// resolves to a backend.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.Draining() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, v1.Status{Draining: true, Reason: "draining: the server is shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, _, err := s.opts.Engine.Select(ctx, sandbox.Selection{}); err != nil {
		// Anyone may ask: the engine's words (backends' reasons, paths)
		// go to the log, the caller gets the code.
		s.log.Warn("not ready", "request_id", infoOf(r.Context()).id, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, v1.Status{Reason: "no backend is ready for the configured selection (" + sandbox.CodeOf(err) + "); see GET /v1/health"})
		return
	}
	writeJSON(w, http.StatusOK, v1.Status{OK: true})
}
