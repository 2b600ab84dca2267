package server

import (
	"context"
	"net/http"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// handleHealth is GET /v1/health: the engine's selection report.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, HealthToWire(s.opts.Engine.Report(r.Context())))
}

// handleBackends is GET /v1/backends.
func (s *Server) handleBackends(w http.ResponseWriter, r *http.Request) {
	out := v1.Backends{Backends: HealthToWire(s.opts.Engine.Report(r.Context())).Candidates}
	if out.Backends == nil {
		out.Backends = []v1.Backend{}
	}
	writeJSON(w, http.StatusOK, out)
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
		writeJSON(w, http.StatusServiceUnavailable, v1.Status{Reason: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v1.Status{OK: true})
}
