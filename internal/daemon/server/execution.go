package server

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/sandbox"
)

// execution follows one execution request from admission to its answer,
// and leaves its audit row, metrics and log attributes at the end.
type execution struct {
	s       *Server
	r       *http.Request
	info    *info
	start   time.Time
	entry   audit.Entry
	release []func()
	ended   bool
	// pass is the guard's admission; the execution's CPU time (cpu) is
	// charged to it when the execution ends.
	pass *guard.Pass
	cpu  time.Duration
	// refused, when set, takes a refusal's problem instead of the
	// response: for surfaces that answer in a shape of their own (the E2B
	// API's Connect procedures).
	refused **v1.Problem
}

func (s *Server) begin(r *http.Request, op v1.Operation) *execution {
	in := infoOf(r.Context())
	x := &execution{s: s, r: r, info: in, start: time.Now()}
	x.entry.ID = sandbox.NewID()
	x.entry.Operation = string(op)
	x.entry.RequestID = in.id
	x.entry.Remote = hostOnly(r.RemoteAddr)
	if in.identity != nil {
		x.entry.Token = in.identity.Name
	}
	x.entry.RunID, x.entry.NodeName, x.entry.ToolCallID = in.caller.RunID, in.caller.NodeName, in.caller.ToolCallID
	return x
}

// admit takes the token's limits (rate and in-flight executions). A
// refusal is answered here; admit then returns false.
func (x *execution) admit(w http.ResponseWriter) bool {
	if x.s.closing.Load() {
		x.fail(w, sandbox.Errorf(sandbox.ErrUnavailable, v1.CodeDraining, "the server is shutting down; retry on another instance"))
		return false
	}
	if id := x.info.identity; id != nil {
		release, err := id.Admit()
		if err != nil {
			x.fail(w, err)
			return false
		}
		x.release = append(x.release, release)
	}
	return true
}

// inFlight counts the execution in flight until it ends. The engine's
// gates (run slots, the function executor's) refuse what is over them.
func (x *execution) inFlight() {
	x.release = append(x.release, x.s.metrics.Start(x.entry.Operation))
}

// detach gives x a copy of its request's info, for an execution that
// outlives its request (an E2B process runs on after the stream that
// started it): what it records at its end is no longer the request's
// log line, which may be being written.
func (x *execution) detach() {
	in := *x.info
	in.attrs = slices.Clone(in.attrs)
	x.info = &in
}

// fail answers err as a problem and records it.
func (x *execution) fail(w http.ResponseWriter, err error) {
	p := problemOf(x.r, err)
	x.entry.ErrorCode = p.Code
	if p.Status >= 500 {
		// The caller gets a detail without the host's paths; the log the
		// whole error.
		x.s.log.Error("request failed", "request_id", x.info.id, "code", p.Code, "err", err)
	}
	if p.Status == http.StatusTooManyRequests {
		x.s.metrics.Busy(x.entry.Operation, p.Code)
	}
	x.end()
	if x.refused != nil {
		redactProblem(p)
		*x.refused = p
		return
	}
	writeProblem(w, x.r, p)
}

// ran records a run's result, and its code: what ran is what the audit
// log may keep (a refused request keeps only its hash).
func (x *execution) ran(res *sandbox.Result, code string) {
	x.entry.Code = code
	x.entry.Backend, x.entry.Isolation = res.Backend, res.Isolation.String()
	x.entry.Reason = string(res.Reason)
	exit, usage := res.ExitCode, res.Usage
	x.entry.ExitCode, x.entry.Usage = &exit, &usage
	x.cpu = res.Usage.CPU
}

// answered records a function response.
func (x *execution) answered(resp *function.Response) {
	x.entry.Backend, x.entry.Isolation = resp.Backend, resp.Isolation
	x.cpu = resp.CPU
	if resp.OK {
		x.entry.Reason = "ok"
		return
	}
	x.entry.Reason, x.entry.ErrorCode = resp.Code, resp.Code
}

// end records the execution: the audit row, the metrics and the
// request's log attributes. Handlers call it before they write the answer,
// so a caller that has its answer finds its row; later calls do nothing.
func (x *execution) end() {
	if x.ended {
		return
	}
	x.ended = true
	x.pass.Charge(x.cpu)
	for i := len(x.release) - 1; i >= 0; i-- {
		x.release[i]()
	}
	e := &x.entry
	e.Time = x.start
	e.Duration = time.Since(x.start)
	reason := e.Reason
	if reason == "" {
		reason = e.ErrorCode
	}
	x.s.metrics.Executed(e.Operation, e.Backend, reason, e.Duration)
	x.info.attrs = append(x.info.attrs, slog.String("kind", e.Operation), slog.String("run_id", e.ID))
	if e.Backend != "" {
		x.info.attrs = append(x.info.attrs, slog.String("backend", e.Backend))
	}
	if reason != "" {
		x.info.attrs = append(x.info.attrs, slog.String("reason", reason))
	}
	if e.ErrorCode != "" {
		x.info.attrs = append(x.info.attrs, slog.String("error_code", e.ErrorCode))
	}
	if x.s.opts.Audit == nil {
		return
	}
	if _, err := x.s.opts.Audit.Record(context.WithoutCancel(x.r.Context()), *e); err != nil {
		x.s.metrics.AuditError()
		x.s.log.Error("writing the audit log", "request_id", e.RequestID, "run_id", e.ID, "err", err)
	}
}
