package server

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

func (s *Server) toolRoutes() []route {
	return []route{
		{"GET", "/v1/tools", token, s.handleTools},
		// "{name}:run": a wildcard is a whole segment, so the verb is
		// split off in the handler.
		{"POST", "/v1/tools/{call}", token, s.handleTool},
	}
}

// toolRun is the tool package's RunFunc for owner: admitted like a run
// (a slot and its result memory until it returns), on sel.
func (s *Server) toolRun(owner engine.Owner, sel sandbox.Selection) tool.RunFunc {
	return func(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
		t, err := s.opts.Engine.Admit(ctx, owner, sel, spec)
		if err != nil {
			return nil, err
		}
		defer t.Release()
		return t.Run(ctx, sel, p)
	}
}

// handleTools is GET /v1/tools: the tools and the broken ones. The first
// call, and the first after the tools dirs changed, runs the discovery in
// a sandbox (where the query's backend, tier and min_isolation say). A
// tools dir is a host path: only admin tokens see it, as a tool's source
// or in a problem (hostView).
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	out := v1.Tools{Tools: []v1.Tool{}, Problems: []v1.ToolProblem{}}
	if s.opts.Tools != nil {
		q := r.URL.Query()
		sel := sandbox.Selection{Backend: q.Get("backend"), Tier: q.Get("tier"), MinIsolation: q.Get("min_isolation")}
		cat, err := s.opts.Tools.List(r.Context(), s.toolRun(s.owner(infoOf(r.Context()).identity), sel))
		if err != nil {
			writeProblem(w, r, toolProblem(r, err))
			return
		}
		host := hostView(r)
		for _, t := range cat.Tools {
			t.Source = toolSource(t.Source, host)
			out.Tools = append(out.Tools, v1.Tool(t))
		}
		for _, p := range cat.Problems {
			p.Source = toolSource(p.Source, host)
			if !host {
				p.Message = redactPaths(p.Message)
			}
			out.Problems = append(out.Problems, v1.ToolProblem(p))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// hostView says whether r's caller may see where things are on the host:
// admin tokens only.
func hostView(r *http.Request) bool {
	id := infoOf(r.Context()).identity
	return id != nil && id.Admin
}

// toolSource is a tool's source as a caller sees it: "builtin", or the
// tools dir's host path only when host (else "<path>").
func toolSource(src string, host bool) string {
	if host || src == tool.Builtin {
		return src
	}
	return redactPaths(src)
}

// toolProblem is err as r's caller may see it: the tool errors that name
// a tools dir or the runtime dir on the host (the operator's to fix) have
// their paths blanked unless r's caller is an admin token.
func toolProblem(r *http.Request, err error) *v1.Problem {
	p := problemOf(r, err)
	if c := p.Code; !hostView(r) && (c == tool.CodeDirInvalid || c == tool.CodeRuntimeUnsafe) {
		p.Detail = redactPaths(p.Detail)
	}
	return p
}

// handleTool is POST /v1/tools/{name}:run. The call is checked (its
// limits against the maxima, the tool, its arguments against the schema)
// before the guard and before anything starts; a tool that ran and failed is answered 200 with ok
// false, as a function call is.
func (s *Server) handleTool(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("call"), ":run")
	if !ok {
		writeProblem(w, r, v1.ProblemFor(http.StatusNotFound, v1.CodeNotFound, "no such route: %s %s (a tool runs at /v1/tools/{name}:run)", r.Method, r.URL.Path))
		return
	}
	x := s.begin(r, v1.OpTool)
	defer x.end()
	if !x.admit(w) {
		return
	}
	var req v1.ToolRunRequest
	if err := s.decodeJSON(w, r, &req, s.opts.MaxBody); err != nil {
		x.fail(w, err)
		return
	}
	x.inFlight()
	x.entry.CodeSHA256 = toolHash(name, &req)
	if s.opts.Tools == nil {
		x.fail(w, sandbox.Errorf(sandbox.ErrNotFound, tool.CodeNotFound, "this server has no tools"))
		return
	}
	for path := range req.Files {
		if err := sandbox.CheckPath(path); err != nil {
			x.fail(w, &v1.FieldError{Field: "files", Err: err})
			return
		}
	}
	// Limits over their maxima, and a timeout (the call's wall limit) over
	// max_limits.wall, are refused here, naming the field: before anything
	// runs and before the guard holds the call for an operator.
	if _, err := s.opts.Engine.Limits(req.Limits); err != nil {
		x.fail(w, &v1.FieldError{Field: "limits", Err: err})
		return
	}
	if _, err := s.opts.Engine.Limits(sandbox.Limits{Wall: time.Duration(req.Timeout)}); err != nil {
		x.fail(w, &v1.FieldError{Field: "timeout", Err: err})
		return
	}
	owner := s.owner(x.info.identity)
	sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
	call := tool.Call{Name: name, Args: req.Args, Files: req.Files, Limits: req.Limits, Timeout: time.Duration(req.Timeout)}
	checked, err := s.opts.Tools.Check(r.Context(), s.toolRun(owner, sel), call)
	if err != nil {
		x.fail(w, toolProblem(r, err))
		return
	}
	if !x.check(w, guard.Call{Tool: name, Language: "python"}, &sel) {
		return
	}
	resp, err := checked.Run(engine.WithTool(r.Context(), name), s.toolRun(owner, sel))
	if err != nil {
		x.fail(w, err)
		return
	}
	resp.Source = toolSource(resp.Source, hostView(r))
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = resp.Backend, resp.Isolation, "ok"
	if !resp.OK {
		x.entry.Reason, x.entry.ErrorCode = resp.Error.Code, resp.Error.Code
	}
	usage := resp.Usage
	x.entry.Usage, x.cpu = &usage, usage.CPU
	x.entry.Code = string(req.Args) // it ran: keep it (audit.store_code)
	x.end()
	writeJSON(w, http.StatusOK, wire.ToolResult(resp, x.entry.ID))
}

// toolHash is a tool call's audit hash: the tool, its arguments and files.
func toolHash(name string, req *v1.ToolRunRequest) string {
	h := audit.NewRequestHash("tool")
	h.Field("name", []byte(name))
	h.Field("args", req.Args)
	for _, p := range slices.Sorted(maps.Keys(req.Files)) {
		h.Field("file:"+p, req.Files[p])
	}
	return h.Sum()
}
