package wire

import (
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/tool"
)

// FunctionRequest returns r as the API's request (`execbox fn
// --remote` sends it).
func FunctionRequest(r *function.Request) *v1.FunctionRequest {
	return &v1.FunctionRequest{
		Code: r.Code, Params: r.Params, Entrypoint: r.Entrypoint, Mode: string(r.Mode), Language: string(r.Language),
		Timeout: time.Duration(r.Timeout), Backend: r.Backend, Tier: r.Tier, MinIsolation: r.MinIsolation,
	}
}

// FunctionResponse returns r as the API's answer.
func FunctionResponse(r *function.Response) *v1.FunctionResponse {
	var diags []v1.Diagnostic
	if r.Diagnostics != nil {
		diags = make([]v1.Diagnostic, len(r.Diagnostics))
		for i, d := range r.Diagnostics {
			diags[i] = v1.Diagnostic(d)
		}
	}
	return &v1.FunctionResponse{
		OK: r.OK, Data: r.Data, Error: r.Error, Code: r.Code, Type: r.Type, Traceback: r.Traceback,
		Diagnostics: diags, Stdout: r.Stdout, StdoutTruncated: r.StdoutTruncated, DurationMS: r.DurationMS,
		Backend: r.Backend, Isolation: r.Isolation,
	}
}

// FunctionResponseOf returns the API's answer as the function
// protocol's response (`execbox fn --remote` prints it).
func FunctionResponseOf(r *v1.FunctionResponse) *function.Response {
	var diags []function.Diagnostic
	if r.Diagnostics != nil {
		diags = make([]function.Diagnostic, len(r.Diagnostics))
		for i, d := range r.Diagnostics {
			diags[i] = function.Diagnostic(d)
		}
	}
	return &function.Response{
		OK: r.OK, Data: r.Data, Error: r.Error, Code: r.Code, Type: r.Type, Traceback: r.Traceback,
		Diagnostics: diags, Stdout: r.Stdout, StdoutTruncated: r.StdoutTruncated, DurationMS: r.DurationMS,
		Backend: r.Backend, Isolation: r.Isolation,
	}
}

// Health returns the engine's selection report as GET /v1/health
// answers it (`execbox doctor` prints it too).
func Health(r engine.Report) v1.Health {
	var cs []v1.Backend
	if r.Candidates != nil {
		cs = make([]v1.Backend, len(r.Candidates))
		for i, c := range r.Candidates {
			cs[i] = Backend(c)
		}
	}
	return v1.Health{
		Configured: r.Configured, Backend: r.Backend, Isolation: r.Isolation, SelectedBecause: r.SelectedBecause,
		Defaults: r.Defaults, Candidates: cs, Pools: Pools(r.Pools),
	}
}

// Pools returns the pools' state as the API reports it.
func Pools(p engine.PoolsStatus) v1.Pools {
	out := v1.Pools{Size: p.Size, Reason: p.Reason}
	if p.Pools != nil {
		out.Pools = make([]v1.Pool, 0, len(p.Pools))
	}
	for _, s := range p.Pools {
		out.Pools = append(out.Pools, v1.Pool{Backend: s.Backend, Language: s.Template, Size: s.Size, Ready: s.Ready, Filling: s.Filling,
			Hits: s.Hits, Misses: s.Misses, Made: s.Made, Failed: s.Failed, Lost: s.Lost, IdleMemory: s.IdleMemory,
			LastRefill: s.LastRefill, Error: s.Error})
	}
	return out
}

// Backend returns one backend of the report as the API lists it.
func Backend(c engine.Candidate) v1.Backend {
	return v1.Backend{
		Name: c.Name, Isolation: c.Isolation, Available: c.Available, Ready: c.Ready, Reason: c.Reason,
		Details: c.Details, Enforcement: c.Enforcement, Sessions: c.Sessions, Unisolated: c.Unisolated,
		Allowed: c.AllowedByCfg, Capacity: capacity(c.Capacity), Warm: c.Warm,
	}
}

// capacity returns a backend's admission lane as the API reports it.
func capacity(l *engine.Lane) *v1.Capacity {
	if l == nil {
		return nil
	}
	return &v1.Capacity{Lane: l.Name, Slots: l.Slots, InUse: l.InUse, Source: l.Source}
}

// AuditQueryOf returns the API's audit filter as the store's.
func AuditQueryOf(q v1.AuditQuery) audit.Query {
	return audit.Query{
		Token: q.Token, Operation: string(q.Operation), ErrorCode: q.ErrorCode, Session: q.Session, RunID: q.RunID, Since: q.Since, Until: q.Until, Limit: q.Limit,
	}
}

// Audit returns audit records, and how many matched in all, as GET
// /v1/audit answers them (`execbox audit --json` prints it too).
func Audit(recs []audit.Record, total int) v1.Audit {
	out := v1.Audit{Records: make([]v1.AuditRecord, len(recs)), Total: total}
	for i, r := range recs {
		out.Records[i] = AuditRecord(r)
	}
	return out
}

// AuditRecord returns one audit record as the API lists it.
func AuditRecord(r audit.Record) v1.AuditRecord {
	return v1.AuditRecord{
		ID: r.ID, Time: r.Time, RequestID: r.RequestID, Token: r.Token, Operation: v1.Operation(r.Operation),
		Backend: r.Backend, Isolation: r.Isolation, Limits: r.Limits, Reason: r.Reason, ExitCode: r.ExitCode,
		Duration: r.Duration, Usage: r.Usage, CodeSHA256: r.CodeSHA256, Code: r.Code, ErrorCode: r.ErrorCode, Remote: r.Remote, Session: r.Session,
		Caller: v1.Caller{RunID: r.RunID, NodeName: r.NodeName, ToolCallID: r.ToolCallID}, Terminal: r.Terminal, Inputs: inputs(r.Inputs),
	}
}

func inputs(in []audit.Input) []v1.AuditInput {
	var out []v1.AuditInput
	for _, i := range in {
		out = append(out, v1.AuditInput(i))
	}
	return out
}

// Session is a session as the API shows it.
func Session(i engine.SessionInfo) v1.Session {
	return v1.Session{
		ID: i.ID, Owner: i.Owner, Backend: i.Backend, Isolation: i.Isolation.String(), Labels: i.Labels, Limits: i.Limits,
		Created: i.Created, Expires: i.Expires, LastUsed: i.LastUsed, IdleTimeout: v1.Seconds(i.IdleTimeout), Execs: i.Execs,
	}
}

// Context is an interpreter context as the API shows it.
func Context(c engine.ContextInfo) v1.Context {
	return v1.Context{ID: c.ID, Language: c.Language, Created: c.Created, Calls: c.Calls, Lost: c.Lost}
}

// Terminal is a terminal as the API shows it.
func Terminal(t engine.TerminalInfo) v1.Terminal {
	out := v1.Terminal{ID: t.ID, Command: t.Args, Created: t.Created}
	if t.Exit != nil {
		out.Exit = &v1.TerminalExit{ExitCode: t.Exit.ExitCode, Signal: t.Exit.Signal, Error: t.Exit.Error}
	}
	return out
}

// ToolResult returns a tool call's response as the API's answer.
func ToolResult(r *tool.Response, id string) *v1.ToolResult {
	out := &v1.ToolResult{
		ID: id, OK: r.OK, Result: r.Result, Output: r.Output, OutputTruncated: r.OutputTruncated, Artifacts: r.Artifacts,
		Source: r.Source, Backend: r.Backend, Isolation: r.Isolation, DurationMS: r.Duration.Milliseconds(), Usage: r.Usage,
	}
	if r.Error != nil {
		e := v1.ToolError(*r.Error)
		out.Error = &e
	}
	return out
}

// Approval is a call held for an admin's decision as the API shows it.
func Approval(a guard.Approval) v1.Approval {
	c := a.Call
	return v1.Approval{
		ID: a.ID, Rule: a.Rule, Token: c.Token, Operation: c.Operation, Tool: c.Tool, Language: c.Language, Backend: c.Backend,
		Caller: event.Caller{RunID: c.RunID, NodeName: c.NodeName, ToolCallID: c.ToolCallID}, Created: a.Created, Expires: a.Expires,
	}
}
