package server

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkFunctionCall compares one trivial function call made as a
// library call (function.Executor.Execute) with the same call over the
// HTTP API on loopback (client.Execute → the real handler → the same
// executor), side by side in one run, and reports p50 and p99.
//
// "local" runs the real Python runner on the local backend, so the
// difference is the HTTP overhead on top of a real call; "stub" answers
// from a runner that returns a canned result at once, so what is measured
// is the protocol and HTTP overhead alone. "http+audit" adds the audit
// row every served call writes (SQLite, WAL, synchronous=NORMAL).
func BenchmarkFunctionCall(b *testing.B) {
	stub := function.EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
		return &sandbox.Result{Backend: "stub", Reason: sandbox.ReasonExited, Stdout: `{"ok":true,"data":3}`}, nil
	})
	req := &function.Request{Code: "def main(a, b):\n    return a + b\n", Params: []byte(`{"a":1,"b":2}`)}
	wreq := wire.FunctionRequest(req)
	for _, runner := range []string{"local", "stub"} {
		if runner == "local" {
			requirePython(b)
		}
		en := newEnv(b, setup{noAudit: true, fnConc: 1})
		audited := newEnv(b, setup{fnConc: 1})
		fx := en.srv.opts.Functions
		if runner == "stub" {
			var err error
			if fx, err = function.New(stub, function.Options{Concurrency: 1}); err != nil {
				b.Fatal(err)
			}
			en.srv.opts.Functions = fx
		}
		audited.srv.opts.Functions = fx
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		b.Cleanup(tr.CloseIdleConnections)
		c, err := client.New(en.http.URL, client.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			b.Fatal(err)
		}
		ca, err := client.New(audited.http.URL, client.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			b.Fatal(err)
		}
		calls := map[string]func() (*v1.FunctionResponse, error){
			"library": func() (*v1.FunctionResponse, error) {
				return wire.FunctionResponse(fx.Execute(context.Background(), req)), nil
			},
			"http":       func() (*v1.FunctionResponse, error) { return c.Execute(context.Background(), wreq) },
			"http+audit": func() (*v1.FunctionResponse, error) { return ca.Execute(context.Background(), wreq) },
		}
		for _, via := range []string{"library", "http", "http+audit"} {
			b.Run(runner+"/"+via, func(b *testing.B) {
				call := calls[via]
				var took []time.Duration
				for b.Loop() {
					start := time.Now()
					resp, err := call()
					took = append(took, time.Since(start))
					if err != nil || !resp.OK || string(resp.Data) != "3" {
						b.Fatalf("%+v %v", resp, err)
					}
				}
				slices.Sort(took)
				pct := func(p float64) float64 {
					return float64(took[min(len(took)-1, int(float64(len(took))*p))].Microseconds())
				}
				b.ReportMetric(pct(0.50), "p50-µs")
				b.ReportMetric(pct(0.99), "p99-µs")
			})
		}
	}
}
