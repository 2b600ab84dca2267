package server

import (
	"cmp"
	"net/http"
	"reflect"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// handleFunction is POST /v1/functions:execute and /v1/functions:lint. A
// call whose code ran and failed by itself (v1.Ran) is answered 200
// with ok false; any other failure is a problem with the code's status.
func (s *Server) handleFunction(op v1.Operation) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x := s.begin(r, op)
		defer x.end()
		// The executor has its own gate (functions.concurrency); the
		// token's limits apply here.
		if !x.admit(w) {
			return
		}
		if err := checkJSON(r); err != nil {
			x.fail(w, err)
			return
		}
		// The protocol's own bound: over 128 KiB is input_too_large (413).
		body, err := s.readBody(w, r, function.MaxInput+1)
		if err != nil {
			x.fail(w, err)
			return
		}
		if len(body) <= function.MaxInput {
			if err := checkStrict(body, reflect.TypeFor[function.Request]()); err != nil {
				x.fail(w, err)
				return
			}
		}
		req, err := function.DecodeRequest(body)
		if err != nil {
			x.fail(w, err)
			return
		}
		x.inFlight()
		x.entry.CodeSHA256 = functionHash(req)
		timeout := time.Duration(req.Timeout)
		if timeout == 0 {
			timeout = s.opts.FunctionTimeout
		}
		x.entry.Limits = &sandbox.Limits{Wall: timeout}
		if op == v1.OpLint {
			req.Mode = function.ModeLint
		} else if req.Mode == function.ModeLint {
			x.entry.Operation = string(v1.OpLint)
		}
		sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
		if !x.check(w, guard.Call{Language: cmp.Or(string(req.Language), string(function.Python))}, &sel) {
			return
		}
		req.Backend, req.Tier, req.MinIsolation = sel.Backend, sel.Tier, sel.MinIsolation
		resp := s.opts.Functions.Execute(r.Context(), req)
		x.answered(resp)
		if resp.OK || v1.Ran(resp.Code) {
			x.entry.Code = req.Code // it ran: keep it (audit.store_code)
			x.end()
			writeJSON(w, http.StatusOK, wire.FunctionResponse(resp))
			return
		}
		x.entry.Reason = "" // nothing ran to its end: a refusal or a failure around the code
		x.fail(w, resp.Err())
	}
}

// functionHash is a function call's audit hash: its code, entrypoint,
// params and language.
func functionHash(req *function.Request) string {
	h := audit.NewRequestHash("function")
	h.Field("code", []byte(req.Code))
	h.Field("entrypoint", []byte(req.Entrypoint))
	h.Field("params", req.Params)
	h.Field("language", []byte(req.Language))
	return h.Sum()
}
