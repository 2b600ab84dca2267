package client

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	v1 "github.com/execbox/execbox/api/v1"
	_ "github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts the real server (local backend) and returns its URL; more
// change its options.
func serve(t *testing.T, more ...func(*server.Options)) string {
	t.Helper()
	work := t.TempDir()
	e, err := engine.New(engine.Options{
		Backend: "local", AllowUnisolated: true, Backends: []string{"local"},
		Settings: func(string) sandbox.Settings {
			return sandbox.Settings{WorkRoot: work, Defaults: sandbox.Defaults}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Close)
	a, err := auth.New([]auth.Token{auth.FromSecret("secret")}, auth.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := audit.Open(t.TempDir()+"/audit.db", audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := server.Options{Engine: e, Auth: a, Audit: st}
	for _, f := range more {
		f(&o)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func newClient(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := New(url, append([]Option{WithHTTPClient(&http.Client{Transport: tr})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClient(t *testing.T) {
	testutil.RequiresBinary(t, "python3", "python3")
	url := serve(t)
	ctx := context.Background()
	c := newClient(t, url+"/", WithToken("secret"))

	res, err := c.Run(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "cat; exit 2"}, Stdin: "in"})
	if err != nil || res.ExitCode != 2 || res.Stdout != "in" || res.ID == "" {
		t.Fatalf("Run: %+v %v", res, err)
	}
	var out, errs bytes.Buffer
	res, err = c.RunStream(ctx, &v1.RunRequest{Command: []string{"sh", "-c", "echo o; echo e >&2"}}, &out, &errs)
	if err != nil || out.String() != "o\n" || errs.String() != "e\n" || res.Stdout != "o\n" {
		t.Fatalf("RunStream: %+v %v %q %q", res, err, out.String(), errs.String())
	}
	// Nil writers drop the output.
	if _, err := c.RunStream(ctx, &v1.RunRequest{Command: []string{"echo", "x"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(x):\n    return x * 2\n", Params: []byte(`{"x":21}`)})
	if err != nil || !r.OK || string(r.Data) != "42" {
		t.Fatalf("Execute: %+v %v", r, err)
	}
	r, err = c.Execute(ctx, &v1.FunctionRequest{Code: "def main():\n    raise ValueError('no')\n"})
	if err != nil || r.OK || r.Code != function.CodeUserError || r.Error != "no" {
		t.Fatalf("Execute, user error: %+v %v", r, err)
	}
	d, err := c.Lint(ctx, &v1.FunctionRequest{Code: "def main(:"})
	if err != nil || len(d) != 1 {
		t.Fatalf("Lint: %+v %v", d, err)
	}
	d, err = c.Lint(ctx, &v1.FunctionRequest{Code: "def main(): pass"})
	if err != nil || d == nil || len(d) != 0 {
		t.Fatalf("Lint, valid: %+v %v", d, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Backend != "local" {
		t.Fatalf("Health: %+v %v", h, err)
	}
	bs, err := c.Backends(ctx)
	if err != nil || len(bs) != 1 || bs[0].Name != "local" {
		t.Fatalf("Backends: %+v %v", bs, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	a, err := c.Audit(ctx, v1.AuditQuery{Operation: v1.OpRun})
	if err != nil || a.Total != 3 {
		t.Fatalf("Audit: %+v %v", a, err)
	}

	// Failures are problems with their kind and code.
	_, err = c.Run(ctx, &v1.RunRequest{Command: []string{"true"}, Network: "host"})
	var p *v1.Problem
	if !errors.As(err, &p) || p.Status != 403 || !errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != "network_denied" || p.Field != "network" {
		t.Fatalf("denied: %#v", err)
	}
	_, err = c.Execute(ctx, &v1.FunctionRequest{Code: " "})
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != function.CodeInvalidCode {
		t.Fatalf("invalid code: %v", err)
	}
	// A refused stream is a problem too (only local is built here: no
	// backend could ever give the tier's isolation).
	_, err = c.RunStream(ctx, &v1.RunRequest{Command: []string{"true"}, Tier: "standard"}, nil, nil)
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "isolation_unsupported" {
		t.Fatalf("refused stream: %v", err)
	}
	anon := newClient(t, url)
	if _, err := anon.Health(ctx); !errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != v1.CodeUnauthenticated {
		t.Fatalf("no token: %v", err)
	}
}

func TestForeignAnswers(t *testing.T) {
	// A proxy in front of the server answers in its own format.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			w.Write([]byte(`{"ok":false,"draining":true,"reason":"draining: the server is shutting down"}`))
		case "/v1/health":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
		case "/v1/backends":
			w.Write([]byte("not json"))
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(502)
			w.Write([]byte("bad gateway\n"))
		}
	}))
	defer hs.Close()
	c := newClient(t, hs.URL)
	ctx := context.Background()
	err := c.Ready(ctx)
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "draining") {
		t.Errorf("readyz: %v", err)
	}
	_, err = c.Health(ctx)
	var p *v1.Problem
	if !errors.As(err, &p) || p.RetryAfter != 7 || !errors.Is(err, sandbox.ErrBusy) {
		t.Errorf("429: %#v", err)
	}
	if _, err := c.Backends(ctx); !errors.Is(err, sandbox.ErrInternal) || sandbox.CodeOf(err) != "answer_invalid" {
		t.Errorf("not JSON: %v", err)
	}
	_, err = c.Run(ctx, &v1.RunRequest{Command: []string{"true"}})
	if !errors.As(err, &p) || p.Status != 502 || p.Code != "bad_gateway" || !strings.Contains(p.Detail, "bad gateway") {
		t.Errorf("502: %#v", err)
	}
}

func TestUnreachableAndBadURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := newClient(t, "http://"+addr)
	if _, err := c.Health(context.Background()); !errors.Is(err, sandbox.ErrUnavailable) || sandbox.CodeOf(err) != "server_unreachable" {
		t.Errorf("unreachable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := c.Health(ctx); sandbox.CodeOf(err) != "interrupted" {
		t.Errorf("cancelled: %v", err)
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "::"} {
		if _, err := New(bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
