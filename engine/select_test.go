package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// stub is a backend whose isolation level and health the test sets. The
// selection rules are policy over Capabilities and Health; which real
// technology sits behind them does not matter to them (the backends' own
// tests run the real things).
type stub struct {
	name   string
	iso    sandbox.Isolation
	emu    bool // Capabilities.Emulated
	mu     sync.Mutex
	h      sandbox.Health
	probes int // Health calls
}

func (s *stub) Name() string { return s.name }
func (s *stub) Capabilities() sandbox.Capabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.Capabilities{Isolation: s.iso, Emulated: s.emu}
}
func (s *stub) Health(context.Context) sandbox.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probes++
	h := s.h
	h.CheckedAt = time.Now()
	return h
}

func (s *stub) probeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probes
}

// Create fails as a real backend does on a host where it cannot work: its
// health reason as an ErrUnavailable; where it can, with a plain error
// (nothing here runs).
func (s *stub) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.h.Available {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "stub_unavailable", "%s backend: %s", s.name, s.h.Reason)
	}
	return nil, errors.New("stub")
}
func (s *stub) set(avail, ready bool, reason string) {
	s.mu.Lock()
	s.h = sandbox.Health{Available: avail, Ready: ready, Reason: reason}
	s.emu = false
	s.mu.Unlock()
}

var stubs = map[string]*stub{}

func init() {
	for name, iso := range map[string]sandbox.Isolation{
		"t-none": sandbox.IsolationNone, "t-proc1": sandbox.IsolationProcess, "t-proc2": sandbox.IsolationProcess,
		"t-kernel": sandbox.IsolationKernel, "t-vm": sandbox.IsolationVM,
	} {
		s := &stub{name: name, iso: iso}
		stubs[name] = s
		sandbox.Register(sandbox.Registration{Name: name, New: func(sandbox.Settings) (sandbox.Backend, error) { return s, nil }})
	}
	// Registered once, at init: a test run with -count registers nothing twice.
	sandbox.Register(sandbox.Registration{Name: "t-broken", New: func(sandbox.Settings) (sandbox.Backend, error) { return nil, errors.New("bad settings") }})

}

// world sets every stub's health: names listed are available and ready.
func world(ready ...string) {
	for name, s := range stubs {
		s.set(false, false, name+" is not installed")
	}
	for _, n := range ready {
		stubs[n].set(true, true, "ok")
	}
}

func newEngine(t *testing.T, o Options) *Engine {
	t.Helper()
	o.Backends = []string{"t-none", "t-proc1", "t-proc2", "t-kernel", "t-vm"}
	if o.Preference == nil {
		o.Preference = []string{"t-proc1", "t-proc2"}
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func selectName(t *testing.T, e *Engine, sel sandbox.Selection) (string, error) {
	t.Helper()
	_, d, err := e.Select(context.Background(), sel)
	return d.Backend, err
}

func TestSelection(t *testing.T) {
	tests := []struct {
		name    string
		ready   []string
		opts    Options
		sel     sandbox.Selection
		want    string // backend, or "" with wantErr
		wantErr *sandbox.Kind
		errHas  string
	}{
		{"auto takes the strongest ready", []string{"t-proc1", "t-kernel", "t-vm"}, Options{}, sandbox.Selection{}, "t-vm", nil, ""},
		{"auto skips unavailable", []string{"t-proc1", "t-kernel"}, Options{}, sandbox.Selection{}, "t-kernel", nil, ""},
		{"auto ties by preference", []string{"t-proc2", "t-proc1"}, Options{}, sandbox.Selection{}, "t-proc1", nil, ""},
		{"auto ties by configured preference", []string{"t-proc2", "t-proc1"}, Options{Preference: []string{"t-proc2"}}, sandbox.Selection{}, "t-proc2", nil, ""},
		{"auto never picks unisolated", []string{"t-none"}, Options{AllowUnisolated: true}, sandbox.Selection{}, "", sandbox.ErrUnavailable, "never falls back"},
		{"off refuses auto", []string{"t-vm"}, Options{Backend: "off"}, sandbox.Selection{}, "", sandbox.ErrDenied, "turned off"},
		{"off refuses strict", []string{"t-vm"}, Options{Backend: "off"}, sandbox.Selection{Tier: TierStrict}, "", sandbox.ErrDenied, "tier requests included"},
		{"off refuses a named backend", []string{"t-vm"}, Options{Backend: "off"}, sandbox.Selection{Backend: "t-vm"}, "", sandbox.ErrDenied, ""},
		{"unknown backend", nil, Options{}, sandbox.Selection{Backend: "nope"}, "", sandbox.ErrInvalid, "unknown backend"},
		{"unisolated refused without allow", []string{"t-none"}, Options{}, sandbox.Selection{Backend: "t-none"}, "", sandbox.ErrDenied, "allow_unisolated"},
		{"unisolated allowed when named and allowed", []string{"t-none"}, Options{AllowUnisolated: true}, sandbox.Selection{Backend: "t-none"}, "t-none", nil, ""},
		{"a tier never names a backend", []string{"t-none"}, Options{AllowUnisolated: true}, sandbox.Selection{Tier: "t-none"}, "", sandbox.ErrInvalid, "never names a backend"},
		{"a tier named local is refused", []string{"t-none"}, Options{AllowUnisolated: true}, sandbox.Selection{Tier: "local"}, "", sandbox.ErrInvalid, ""},
		{"strict takes kernel or stronger", []string{"t-proc1", "t-kernel"}, Options{}, sandbox.Selection{Tier: TierStrict}, "t-kernel", nil, ""},
		{"strict without kernel fails", []string{"t-proc1", "t-proc2"}, Options{}, sandbox.Selection{Tier: TierStrict}, "", sandbox.ErrUnavailable, "kernel or stronger"},
		{"standard takes the strongest", []string{"t-proc1", "t-vm"}, Options{}, sandbox.Selection{Tier: TierStandard}, "t-vm", nil, ""},
		{"fast takes the preferred fast one", []string{"t-proc2", "t-proc1", "t-kernel"}, Options{}, sandbox.Selection{Tier: TierFast}, "t-proc1", nil, ""},
		{"fast never unisolated", []string{"t-none"}, Options{AllowUnisolated: true}, sandbox.Selection{Tier: TierFast}, "", sandbox.ErrUnavailable, ""},
		{"min_isolation is never undercut", []string{"t-proc1", "t-kernel"}, Options{}, sandbox.Selection{Tier: TierFast, MinIsolation: "kernel"}, "t-kernel", nil, ""},
		{"min_isolation refuses a weaker named backend", []string{"t-proc1"}, Options{}, sandbox.Selection{Backend: "t-proc1", MinIsolation: "kernel"}, "", sandbox.ErrDenied, "below the kernel"},
		{"configured floor: a tier may not lower it", []string{"t-proc1", "t-kernel"}, Options{Backend: "t-kernel"}, sandbox.Selection{Tier: TierFast}, "t-kernel", nil, ""},
		{"configured floor: a named request may not lower it", []string{"t-proc1", "t-kernel"}, Options{Backend: "t-kernel"}, sandbox.Selection{Backend: "t-proc1"}, "", sandbox.ErrDenied, "configured backend"},
		{"a tier may raise isolation", []string{"t-proc1", "t-kernel"}, Options{Backend: "t-proc1"}, sandbox.Selection{Tier: TierStrict}, "t-kernel", nil, ""},
		{"configured min_isolation", []string{"t-proc1", "t-proc2"}, Options{MinIsolation: sandbox.IsolationKernel}, sandbox.Selection{}, "", sandbox.ErrUnavailable, ""},
		{"bad min_isolation", nil, Options{}, sandbox.Selection{MinIsolation: "extreme"}, "", sandbox.ErrInvalid, "extreme"},
		{"backend and tier together", nil, Options{}, sandbox.Selection{Backend: "t-proc1", Tier: TierFast}, "", sandbox.ErrInvalid, "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			world(tc.ready...)
			e := newEngine(t, tc.opts)
			got, err := selectName(t, e, tc.sel)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Select = %q, %v; want %v error containing %q", got, err, tc.wantErr.Code(), tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Select = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A configured backend whose factory failed still bounds what a request
// may ask for: with no level to compare, tiers and named backends are refused.
func TestConfiguredBackendThatFailedToBuildIsStillTheFloor(t *testing.T) {
	world("t-proc1", "t-kernel")
	e, err := New(Options{Backend: "t-broken", Backends: []string{"t-broken", "t-proc1", "t-kernel"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	for _, sel := range []sandbox.Selection{{Tier: TierFast}, {Tier: TierStrict}, {Backend: "t-proc1"}, {}} {
		if got, err := selectName(t, e, sel); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "bad settings") {
			t.Errorf("Select(%+v) = %q, %v; want unavailable naming the factory error", sel, got, err)
		}
	}
}

func TestNotReadyIsSkippedByAutoButNamedWorks(t *testing.T) {
	world("t-proc1")
	stubs["t-vm"].set(true, false, "image not pulled")
	e := newEngine(t, Options{})
	if got, err := selectName(t, e, sandbox.Selection{}); err != nil || got != "t-proc1" {
		t.Fatalf("auto = %q, %v", got, err)
	}
	if got, err := selectName(t, e, sandbox.Selection{Backend: "t-vm"}); err != nil || got != "t-vm" {
		t.Fatalf("named not-ready = %q, %v", got, err)
	}
}

// TestEmulatedIsNeverPickedByAuto: a backend under software emulation
// (a microVM without KVM) is strong but slow: auto goes past it, without
// even probing it; tier strict, a floor at its level and its name may
// still run on it.
func TestEmulatedIsNeverPickedByAuto(t *testing.T) {
	world("t-proc1", "t-kernel", "t-vm")
	stubs["t-vm"].mu.Lock()
	stubs["t-vm"].emu = true
	stubs["t-vm"].mu.Unlock()
	e := newEngine(t, Options{})
	_, d, err := e.Select(context.Background(), sandbox.Selection{})
	if err != nil || d.Backend != "t-kernel" || !strings.Contains(d.Because, "t-vm: runs under software emulation") {
		t.Fatalf("auto = %+v, %v", d, err)
	}
	if _, known := e.knownHealth("t-vm"); known {
		t.Error("auto probed the emulated backend")
	}
	if got, err := selectName(t, e, sandbox.Selection{Tier: TierStrict}); err != nil || got != "t-vm" {
		t.Fatalf("tier strict = %q, %v", got, err)
	}
	if got, err := selectName(t, e, sandbox.Selection{Backend: "t-vm"}); err != nil || got != "t-vm" {
		t.Fatalf("named = %q, %v", got, err)
	}
	// A request whose floor is its level asks for it too.
	if got, err := selectName(t, e, sandbox.Selection{MinIsolation: "vm"}); err != nil || got != "t-vm" {
		t.Fatalf("min_isolation vm = %q, %v", got, err)
	}
	// With only the emulated one ready, auto refuses and says why.
	world("t-vm")
	stubs["t-vm"].mu.Lock()
	stubs["t-vm"].emu = true
	stubs["t-vm"].mu.Unlock()
	if _, err := selectName(t, newEngine(t, Options{}), sandbox.Selection{}); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "software emulation") {
		t.Fatalf("auto with only an emulated vm: %v", err)
	}
}

func TestBackendReadyLaterIsPickedUpWithoutRestart(t *testing.T) {
	world("t-proc1")
	e := newEngine(t, Options{})
	if got, _ := selectName(t, e, sandbox.Selection{}); got != "t-proc1" {
		t.Fatalf("before: %q", got)
	}
	stubs["t-kernel"].set(true, true, "ok")
	e.refresh("t-kernel")
	if got, _ := selectName(t, e, sandbox.Selection{}); got != "t-kernel" {
		t.Fatalf("after the kernel backend became ready: %q", got)
	}
}

func TestReport(t *testing.T) {
	world("t-proc1", "t-kernel")
	e := newEngine(t, Options{})
	r := e.Report(context.Background())
	if r.Backend != "t-kernel" || r.Configured != "auto" || !strings.Contains(r.SelectedBecause, "strongest") || len(r.Candidates) != 5 {
		t.Fatalf("report = %+v", r)
	}
	for _, c := range r.Candidates {
		if c.Name == "t-vm" && (c.Available || c.Reason != "t-vm is not installed") {
			t.Fatalf("t-vm candidate = %+v", c)
		}
	}
}

// TestNamedBackendIsNotProbedApart: a named backend is not probed before
// the run; the run's own start fails closed when the backend cannot work,
// and once a probe says so, the request is refused up front. Neither
// falls back to another backend.
func TestNamedBackendIsNotProbedApart(t *testing.T) {
	world("t-proc1")
	for _, o := range []Options{{}, {Backend: "t-kernel"}} {
		e := newEngine(t, o)
		sel := sandbox.Selection{}
		if o.Backend == "" {
			sel.Backend = "t-kernel"
		}
		got, err := selectName(t, e, sel)
		if err != nil || got != "t-kernel" {
			t.Fatalf("%+v: Select = %q, %v; want t-kernel without a probe", o, got, err)
		}
		if _, known := e.knownHealth("t-kernel"); known {
			t.Fatalf("%+v: selecting a named backend probed it", o)
		}
		_, err = e.Run(context.Background(), sel, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}})
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "t-kernel is not installed") {
			t.Fatalf("%+v: Run = %v; want the start's own unavailable error", o, err)
		}
		e.Start() // the daemon probes every backend
		if _, err := e.healthOf(context.Background(), "t-kernel"); err != nil {
			t.Fatal(err)
		}
		if got, err := selectName(t, e, sel); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "does not fall back") {
			t.Fatalf("%+v: known unavailable: Select = %q, %v", o, got, err)
		}
	}
}

// TestAutoProbesOnlyUntilTheFirstReady: auto asks the strongest candidate
// first and stops at the first ready one; the weaker ones stay unprobed.
func TestAutoProbesOnlyUntilTheFirstReady(t *testing.T) {
	world("t-proc1", "t-proc2", "t-kernel")
	e := newEngine(t, Options{})
	if got, err := selectName(t, e, sandbox.Selection{}); err != nil || got != "t-kernel" {
		t.Fatalf("auto = %q, %v", got, err)
	}
	for _, name := range []string{"t-proc1", "t-proc2"} {
		if _, known := e.knownHealth(name); known {
			t.Errorf("%s was probed although a stronger backend was ready", name)
		}
	}
	if _, known := e.knownHealth("t-vm"); !known {
		t.Error("t-vm, the strongest candidate, was not probed")
	}
}

// TestIsolationNoBackendCanGive: asking for an isolation no backend here
// gives is the request's problem (ErrInvalid, naming the strongest there
// is), not a passing unavailability; one a backend gives but that is not
// ready now is.
func TestIsolationNoBackendCanGive(t *testing.T) {
	world("t-proc1")
	e, err := New(Options{Backends: []string{"t-proc1", "t-kernel"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	_, err = selectName(t, e, sandbox.Selection{MinIsolation: "vm"})
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "isolation_unsupported" || !strings.Contains(err.Error(), "strongest here is kernel") {
		t.Fatalf("vm with no vm backend: %v", err)
	}
	_, err = selectName(t, e, sandbox.Selection{MinIsolation: "kernel"})
	if !errors.Is(err, sandbox.ErrUnavailable) || sandbox.CodeOf(err) != "no_backend" {
		t.Fatalf("kernel with the kernel backend not ready: %v", err)
	}
}

// weakStub is a backend without a cgroup here: its limits are weak.
type weakStub struct{ stub }

func (w *weakStub) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Weak: map[string]string{"memory": "per process only"}}
}

var weak = &weakStub{stub{name: "t-weak", iso: sandbox.IsolationProcess}}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-weak", New: func(sandbox.Settings) (sandbox.Backend, error) { return weak, nil }})
}

// TestWeakLimitsAreRefusedUnlessAllowed: a backend whose limits would not
// bound the sandbox as asked is refused, named or picked, with how to
// allow it; allow_weak_limits lets it run.
func TestWeakLimitsAreRefusedUnlessAllowed(t *testing.T) {
	weak.set(true, true, "ok")
	for _, sel := range []sandbox.Selection{{Backend: "t-weak"}, {}} {
		e, err := New(Options{Backends: []string{"t-weak"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = selectName(t, e, sel)
		e.Close()
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "allow_weak_limits") || !strings.Contains(err.Error(), "memory per process only") {
			t.Errorf("%+v: %v, want a refusal naming the weak limit and allow_weak_limits", sel, err)
		}
		e, _ = New(Options{Backends: []string{"t-weak"}, AllowWeakLimits: true})
		if got, err := selectName(t, e, sel); err != nil || got != "t-weak" {
			t.Errorf("%+v with allow_weak_limits: %q, %v", sel, got, err)
		}
		e.Close()
	}
}
