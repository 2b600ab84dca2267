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

// handleOpenAPI is GET /v1/openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := OpenAPI()
	if err != nil {
		writeProblem(w, r, v1.NewProblem(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

// handleAudit is GET /v1/audit (admin tokens).
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	if s.opts.Audit == nil {
		writeProblem(w, r, v1.ProblemFor(http.StatusNotFound, "audit_disabled", "the audit log is off (set audit.path)"))
		return
	}
	q, err := v1.ParseAuditQuery(r.URL.Query())
	if err != nil {
		writeProblem(w, r, v1.NewProblem(err))
		return
	}
	recs, total, err := s.opts.Audit.Query(r.Context(), AuditQueryFromWire(q))
	if err != nil {
		writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrInternal, "audit_failed", "reading the audit log: %w", err)))
		return
	}
	writeJSON(w, http.StatusOK, AuditToWire(recs, total))
}
