package server

import (
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
)

// The API speaks the wire types of api/v1, which import neither the engine
// nor the function package; these conversions are the only place the two
// meet. Each wire type encodes to exactly the JSON of the type it mirrors
// (convert_test.go holds them to it), so converting never changes the API.
// The CLI uses them too where it prints or sends the same shapes.

// FunctionRequestToWire returns r as the API's request (`execbox fn
// --remote` sends it).
func FunctionRequestToWire(r *function.Request) *v1.FunctionRequest {
	return &v1.FunctionRequest{
		Code: r.Code, Params: r.Params, Entrypoint: r.Entrypoint, Mode: string(r.Mode), Language: string(r.Language),
		Timeout: time.Duration(r.Timeout), Backend: r.Backend, Tier: r.Tier, MinIsolation: r.MinIsolation,
	}
}

// FunctionResponseToWire returns r as the API's answer.
func FunctionResponseToWire(r *function.Response) *v1.FunctionResponse {
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

// FunctionResponseFromWire returns the API's answer as the function
// protocol's response (`execbox fn --remote` prints it).
func FunctionResponseFromWire(r *v1.FunctionResponse) *function.Response {
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

// HealthToWire returns the engine's selection report as GET /v1/health
// answers it (`execbox doctor` prints it too).
func HealthToWire(r engine.Report) v1.Health {
	var cs []v1.Backend
	if r.Candidates != nil {
		cs = make([]v1.Backend, len(r.Candidates))
		for i, c := range r.Candidates {
			cs[i] = BackendToWire(c)
		}
	}
	return v1.Health{
		Configured: r.Configured, Backend: r.Backend, Isolation: r.Isolation, SelectedBecause: r.SelectedBecause,
		Defaults: r.Defaults, Candidates: cs, Pools: PoolsToWire(r.Pools),
	}
}

// PoolsToWire returns the pools' state as the API reports it.
func PoolsToWire(p engine.PoolsStatus) v1.Pools {
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

// BackendToWire returns one backend of the report as the API lists it.
func BackendToWire(c engine.Candidate) v1.Backend {
	return v1.Backend{
		Name: c.Name, Isolation: c.Isolation, Available: c.Available, Ready: c.Ready, Reason: c.Reason,
		Details: c.Details, Enforcement: c.Enforcement, Sessions: c.Sessions, Unisolated: c.Unisolated,
		Allowed: c.AllowedByCfg,
	}
}

// AuditQueryFromWire returns the API's audit filter as the store's.
func AuditQueryFromWire(q v1.AuditQuery) audit.Query {
	return audit.Query{
		Token: q.Token, Operation: string(q.Operation), ErrorCode: q.ErrorCode, Session: q.Session, RunID: q.RunID, Since: q.Since, Until: q.Until, Limit: q.Limit,
	}
}

// AuditToWire returns audit records, and how many matched in all, as GET
// /v1/audit answers them (`execbox audit --json` prints it too).
func AuditToWire(recs []audit.Record, total int) v1.Audit {
	out := v1.Audit{Records: make([]v1.AuditRecord, len(recs)), Total: total}
	for i, r := range recs {
		out.Records[i] = AuditRecordToWire(r)
	}
	return out
}

// AuditRecordToWire returns one audit record as the API lists it.
func AuditRecordToWire(r audit.Record) v1.AuditRecord {
	return v1.AuditRecord{
		ID: r.ID, Time: r.Time, RequestID: r.RequestID, Token: r.Token, Operation: v1.Operation(r.Operation),
		Backend: r.Backend, Isolation: r.Isolation, Limits: r.Limits, Reason: r.Reason, ExitCode: r.ExitCode,
		Duration: r.Duration, Usage: r.Usage, CodeSHA256: r.CodeSHA256, Code: r.Code, ErrorCode: r.ErrorCode, Remote: r.Remote, Session: r.Session,
		Caller: v1.Caller{RunID: r.RunID, NodeName: r.NodeName, ToolCallID: r.ToolCallID}, Terminal: r.Terminal, Inputs: inputsToWire(r.Inputs),
	}
}

func inputsToWire(in []audit.Input) []v1.AuditInput {
	var out []v1.AuditInput
	for _, i := range in {
		out = append(out, v1.AuditInput(i))
	}
	return out
}
