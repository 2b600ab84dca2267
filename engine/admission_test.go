package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/sandbox"
)

// capture is a backend whose sandboxes record the spec they were made
// with and end every Exec at once.
type capture struct {
	mu    sync.Mutex
	specs []sandbox.Spec
}

func (c *capture) Name() string { return "t-capture" }
func (c *capture) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess}
}
func (c *capture) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true, Reason: "ok"}
}
func (c *capture) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	c.mu.Lock()
	c.specs = append(c.specs, spec)
	c.mu.Unlock()
	return &capturedBox{}, nil
}
func (c *capture) last() sandbox.Spec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specs[len(c.specs)-1]
}

type capturedBox struct{}

func (*capturedBox) ID() string                                          { return "cap" }
func (*capturedBox) WriteFiles(context.Context, map[string][]byte) error { return nil }
func (*capturedBox) Artifacts(context.Context) (sandbox.Artifacts, error) {
	return sandbox.Artifacts{}, nil
}
func (*capturedBox) Close(context.Context) error { return nil }
func (*capturedBox) Exec(context.Context, *sandbox.Process) (*sandbox.Result, error) {
	return &sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 3}, nil
}

var captured = &capture{}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-capture", New: func(sandbox.Settings) (sandbox.Backend, error) { return captured, nil }})
}

func captureEngine(t *testing.T, o Options) *Engine {
	t.Helper()
	o.Backends, o.Backend = []string{"t-capture"}, "t-capture"
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestPolicyReachesEverySandbox: the configured policy reaches runs,
// created sandboxes and function calls alike; a request adds to the env
// allowlist but cannot replace the configured run_as_user.
func TestPolicyReachesEverySandbox(t *testing.T) {
	pol := sandbox.Policy{RunAsUser: "fnuser", EnvAllowlist: []string{"FOO"}, EnvAllowPrefix: []string{"LC_"}}
	e := captureEngine(t, Options{Policy: pol})
	ctx := context.Background()
	check := func(what string, want []string) {
		t.Helper()
		got := captured.last().Policy
		if got.RunAsUser != "fnuser" || len(got.EnvAllowPrefix) != 1 || got.EnvAllowPrefix[0] != "LC_" {
			t.Errorf("%s: policy %+v, want run_as_user fnuser and prefix LC_", what, got)
		}
		if len(got.EnvAllowlist) != len(want) {
			t.Fatalf("%s: env allowlist %v, want %v", what, got.EnvAllowlist, want)
		}
		for i := range want {
			if got.EnvAllowlist[i] != want[i] {
				t.Errorf("%s: env allowlist %v, want %v", what, got.EnvAllowlist, want)
			}
		}
	}
	req := sandbox.Spec{Policy: sandbox.Policy{RunAsUser: "someone-else", EnvAllowlist: []string{"BAR", "FOO"}}}
	if _, err := e.Run(ctx, sandbox.Selection{}, req, &sandbox.Process{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	check("Run", []string{"FOO", "BAR"})
	sb, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close(ctx)
	check("Create", []string{"FOO"})
	resp := e.Functions().Execute(ctx, &function.Request{Code: "def main():\n    return 1\n"})
	if resp.Code != function.CodeSandboxFailed { // the stub exits 3 and prints nothing
		t.Fatalf("function call answered %+v", resp)
	}
	check("function call", []string{"FOO"})
	// Limits are the engine's too.
	if l := captured.last().Limits; l.Memory != sandbox.Defaults.Memory {
		t.Errorf("function call limits %+v, want the defaults filled in", l)
	}
}

// TestAdmission: MaxRuns sandboxes at once, on both sides of the bound; a
// created sandbox holds its slot until Close; function calls have their
// own bound and are not refused by a full run gate.
func TestAdmission(t *testing.T) {
	e := captureEngine(t, Options{MaxRuns: 2})
	ctx := context.Background()
	run := func() error {
		_, err := e.Run(ctx, sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}})
		return err
	}
	a, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil {
		t.Fatalf("one slot of two taken: Run = %v", err)
	}
	b, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatalf("second slot: %v", err)
	}
	err = run()
	if !errors.Is(err, sandbox.ErrBusy) || sandbox.CodeOf(err) != "busy" {
		t.Fatalf("both slots taken: Run = %v, want busy", err)
	}
	if _, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("both slots taken: Create = %v, want busy", err)
	}
	if resp := e.Functions().Execute(ctx, &function.Request{Code: "def main():\n    return 1\n"}); resp.Code == function.CodeBusy {
		t.Fatalf("a function call was refused by the run gate: %+v", resp)
	}
	a.Close(ctx)
	a.Close(ctx) // a second Close gives back nothing more
	if err := run(); err != nil {
		t.Fatalf("after Close: Run = %v", err)
	}
	if _, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{}); err != nil {
		t.Fatalf("after Close: Create = %v", err)
	}
	if err := run(); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("the double Close freed two slots: Run = %v", err)
	}
	b.Close(ctx)
	if _, err := New(Options{MaxRuns: -1, Backends: []string{}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("MaxRuns -1: %v", err)
	}
}
