package server

import (
	"log/slog"
	"net/http"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// maxDecision bounds the body of POST /v1/approvals/{id}.
const maxDecision = 4 * sandbox.KiB

func (s *Server) approvalRoutes() []route {
	return []route{
		{"GET", "/v1/approvals", admin, s.handleApprovals},
		{"POST", "/v1/approvals/{id}", admin, s.handleDecide},
	}
}

// check asks the guard whether the execution may run, before anything
// starts: c gets the caller, the operation and, when sel is given, its
// backend — when the guard's rules look at backends, the one the engine
// selects now, and sel is pinned to it, so what was checked is what runs;
// otherwise the one the call names. A call a rule holds for confirmation waits here, its
// approval published as events. A refusal is answered here; check then
// returns false. The execution's CPU time is charged to the token's
// budgets when it ends.
func (x *execution) check(w http.ResponseWriter, c guard.Call, sel *sandbox.Selection) bool {
	g := x.s.opts.Guard
	if g == nil {
		return true
	}
	r := x.r
	o := x.s.owner(x.info.identity)
	c.Token, c.Admin = o.Name, o.Privileged
	c.Operation = x.entry.Operation
	c.RunID, c.NodeName, c.ToolCallID = x.entry.RunID, x.entry.NodeName, x.entry.ToolCallID
	if sel != nil && c.Backend == "" {
		c.Backend = sel.Backend
		if g.UsesBackends() {
			// The rules need the backend that will run the call: selected
			// now, and pinned. (A selection that fails here is not retried,
			// as it is when nothing needs it before the run.)
			b, _, err := x.s.opts.Engine.Select(r.Context(), *sel)
			if err != nil {
				x.fail(w, err)
				return false
			}
			c.Backend = b.Name()
			*sel = sandbox.Selection{Backend: c.Backend, MinIsolation: sel.MinIsolation}
		}
	}
	bus := x.s.opts.Engine.Events()
	base := event.Event{Kind: event.KindApproval, Caller: event.Caller{RunID: c.RunID, NodeName: c.NodeName, ToolCallID: c.ToolCallID},
		RequestID: x.info.id, Owner: c.Token, Backend: c.Backend, Tool: c.Tool}
	var held *guard.Approval
	pass, err := g.Admit(r.Context(), c, func(a guard.Approval) {
		held = &a
		ev := base
		ev.Type, ev.Approval, ev.Rule = event.ApprovalRequested, a.ID, a.Rule
		bus.Publish(ev)
	})
	if held != nil {
		ev := base
		ev.Type, ev.Approval, ev.Rule, ev.Reason = event.ApprovalDecided, held.ID, held.Rule, "approved"
		if err != nil {
			ev.Reason = sandbox.CodeOf(err)
			if r.Context().Err() != nil {
				ev.Reason = "canceled"
			}
		}
		bus.Publish(ev)
	}
	if err != nil {
		x.fail(w, err)
		return false
	}
	x.pass = pass
	if r := pass.Rule(); r != "" {
		// The request's log line says which rule let it through.
		x.info.attrs = append(x.info.attrs, slog.String("guard_rule", r))
	}
	return true
}

// handleApprovals is GET /v1/approvals: the calls held for a decision.
func (s *Server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	out := v1.Approvals{Approvals: []v1.Approval{}}
	if s.opts.Guard != nil {
		for _, a := range s.opts.Guard.Pending() {
			out.Approvals = append(out.Approvals, wire.Approval(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleDecide is POST /v1/approvals/{id}: approve or deny a held call;
// the token whose call it is may not approve it (guard.Decide).
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	var d v1.Decision
	if err := s.decodeJSON(w, r, &d, maxDecision); err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	if d.Approve == nil {
		writeProblem(w, r, problemOf(r, &v1.FieldError{Field: "approve", Err: sandbox.Errorf(sandbox.ErrInvalid, "request_invalid", "approve: give true or false")}))
		return
	}
	by := "anonymous"
	if id := infoOf(r.Context()).identity; id != nil {
		by = id.Name
	}
	err := sandbox.Errorf(sandbox.ErrNotFound, guard.CodeApprovalNotFound, "no approval is pending: this server has no guard rules")
	if s.opts.Guard != nil {
		err = s.opts.Guard.Decide(r.PathValue("id"), *d.Approve, by, d.Reason)
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	s.log.Info("approval decided", "approval", r.PathValue("id"), "approve", *d.Approve, "by", by)
	w.WriteHeader(http.StatusNoContent)
}
