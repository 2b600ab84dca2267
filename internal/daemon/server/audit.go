package server

import (
	"net/http"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

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
	recs, total, err := s.opts.Audit.Query(r.Context(), wire.AuditQueryOf(q))
	if err != nil {
		writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrInternal, "audit_failed", "reading the audit log: %w", err)))
		return
	}
	writeJSON(w, http.StatusOK, wire.Audit(recs, total))
}
