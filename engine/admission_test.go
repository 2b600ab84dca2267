package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	resp := fns(e).Execute(ctx, &function.Request{Code: "def main():\n    return 1\n"})
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
	if resp := fns(e).Execute(ctx, &function.Request{Code: "def main():\n    return 1\n"}); resp.Code == function.CodeBusy {
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

// TestMaxima: every limit has a maximum, applied to runs, created
// sandboxes and function calls alike; over one is ErrInvalid naming the
// field, before any slot is taken. A library caller who configures none
// gets the host-sized built-in ones (issue 22: memory 3g, work_size 1t and
// memory 2^63-1 were accepted).
func TestMaxima(t *testing.T) {
	e := captureEngine(t, Options{Max: sandbox.Limits{Memory: sandbox.GiB, Output: 16 * sandbox.MiB}})
	ctx := context.Background()
	p := &sandbox.Process{Args: []string{"true"}}
	for _, tc := range []struct {
		l    sandbox.Limits
		code string
		want string
	}{
		{sandbox.Limits{Memory: 3 * sandbox.GiB}, "limit_too_high", "limits.memory 3g exceeds the maximum 1g (max_limits.memory)"},
		{sandbox.Limits{Output: 300 * sandbox.MiB}, "limit_too_high", "limits.output 300m exceeds the maximum 16m (max_limits.output)"},
		{sandbox.Limits{WorkSize: 1 << 40}, "limit_too_high", "limits.work_size 1t exceeds the maximum"},
		{sandbox.Limits{ArtifactBytes: 250 * sandbox.MiB}, "limit_too_high", "(max_limits.artifact_bytes)"},
		{sandbox.Limits{Memory: 1<<63 - 1}, "limit_invalid", "limits.memory"},
		{sandbox.Limits{Pids: 2147483647}, "limit_invalid", "limits.pids 2147483647 is beyond"},
	} {
		_, err := e.Run(ctx, sandbox.Selection{}, sandbox.Spec{Limits: tc.l}, p)
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run %+v: %v, want %s with %q", tc.l, err, tc.code, tc.want)
		}
		if _, err := e.Create(ctx, sandbox.Selection{}, sandbox.Spec{Limits: tc.l}); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Create %+v: %v, want ErrInvalid", tc.l, err)
		}
	}
	if st := e.Admission(); st.SlotsInUse != 0 || st.ResultMemoryInUse != 0 {
		t.Errorf("refusals hold %+v", st)
	}
	// At the maximum it runs; the built-in maxima fill what Max left zero.
	if _, err := e.Run(ctx, sandbox.Selection{}, sandbox.Spec{Limits: sandbox.Limits{Memory: sandbox.GiB}}, p); err != nil {
		t.Errorf("at the maximum: %v", err)
	}
	if m := e.Maxima(); m.Memory != sandbox.GiB || m.Wall != sandbox.HostMaxima().Wall || m.Pids != sandbox.HostMaxima().Pids {
		t.Errorf("maxima %+v", m)
	}
	// A function call asking for more than the maximum wall is refused too.
	small := captureEngine(t, Options{Max: sandbox.Limits{Wall: 5 * time.Second}, Defaults: sandbox.Limits{Wall: 2 * time.Second}})
	if resp := fns(small).Execute(ctx, &function.Request{Code: "def main():\n    return 1\n", Timeout: function.Duration(10 * time.Second)}); resp.OK || !strings.Contains(resp.Error, "max_limits.wall") {
		t.Errorf("function call over the maximum wall: %+v", resp)
	}
	// The defaults must lie within the maxima.
	if _, err := New(Options{Backends: []string{}, Max: sandbox.Limits{Memory: 128 * sandbox.MiB}}); !errors.Is(err, sandbox.ErrInvalid) ||
		!strings.Contains(err.Error(), "limits.memory 256m exceeds the maximum 128m") {
		t.Errorf("defaults above the maxima: %v", err)
	}
}

// TestTicketHeldUntilReleased: an admitted run keeps its slot and result
// memory after it has run, until the ticket is released (the server
// releases once the answer is written: issue 22's unread results were held
// outside max_runs); what does not fit the result memory is busy.
func TestTicketHeldUntilReleased(t *testing.T) {
	l := sandbox.Limits{Output: 10 * sandbox.MiB, ArtifactBytes: 10 * sandbox.MiB} // 30 MiB of results
	e := captureEngine(t, Options{MaxRuns: 4, ResultMemory: 70 * sandbox.MiB})
	ctx := context.Background()
	p := &sandbox.Process{Args: []string{"true"}}
	var tickets []*Ticket
	for i := range 2 {
		tk, err := e.Admit(context.Background(), Owner{}, sandbox.Selection{}, sandbox.Spec{Limits: l})
		if err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
		if _, err := tk.Run(ctx, sandbox.Selection{}, p); err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if st := e.Admission(); st.SlotsInUse != 2 || st.ResultMemoryInUse != 60*sandbox.MiB {
		t.Fatalf("after two runs, before release: %+v", st)
	}
	_, err := e.Admit(context.Background(), Owner{}, sandbox.Selection{}, sandbox.Spec{Limits: l})
	if !errors.Is(err, sandbox.ErrBusy) || sandbox.CodeOf(err) != "busy" || !strings.Contains(err.Error(), "server.max_result_memory") {
		t.Fatalf("a third 30 MiB run in 70 MiB: %v, want busy", err)
	}
	// A small run still fits (the default limits: 18 MiB).
	small, err := e.Admit(context.Background(), Owner{}, sandbox.Selection{}, sandbox.Spec{Limits: sandbox.Limits{Output: sandbox.MiB, ArtifactBytes: sandbox.MiB}})
	if err != nil {
		t.Fatalf("a 3 MiB run: %v", err)
	}
	small.Release()
	tickets[0].Release()
	tickets[0].Release() // twice gives back nothing more
	if st := e.Admission(); st.SlotsInUse != 1 || st.ResultMemoryInUse != 30*sandbox.MiB {
		t.Fatalf("after one release: %+v", st)
	}
	if tk, err := e.Admit(context.Background(), Owner{}, sandbox.Selection{}, sandbox.Spec{Limits: l}); err != nil {
		t.Fatalf("after a release: %v", err)
	} else {
		tk.Release()
	}
	tickets[1].Release()
	// More than the whole result memory can never run: invalid, not busy.
	_, err = e.Admit(context.Background(), Owner{}, sandbox.Selection{}, sandbox.Spec{Limits: sandbox.Limits{Output: 16 * sandbox.MiB, ArtifactBytes: 64 * sandbox.MiB}})
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "more than the whole result memory") {
		t.Fatalf("a run larger than the result memory: %v", err)
	}
}

// TestOwnerShares: an unprivileged owner holds at most its share of the
// slots, and unprivileged owners together leave the reserved slots to
// privileged ones (issue 22: one plain token could take every slot and lock
// the admin out). Owner{} (no tokens) has no share.
func TestOwnerShares(t *testing.T) {
	e := captureEngine(t, Options{MaxRuns: 4, ReservedRuns: 1})
	admit := func(o Owner) (*Ticket, error) {
		return e.Admit(context.Background(), o, sandbox.Selection{}, sandbox.Spec{})
	}
	alice, bob, root := Owner{Name: "alice"}, Owner{Name: "bob"}, Owner{Name: "root", Privileged: true}
	var held []*Ticket
	take := func(o Owner) {
		t.Helper()
		tk, err := admit(o)
		if err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		held = append(held, tk)
	}
	take(alice)
	take(alice) // her share: half of 4
	if _, err := admit(alice); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "token alice holds 2 run slots") {
		t.Fatalf("alice's third: %v", err)
	}
	take(bob)
	// 3 of 4 taken: the last is the admin's.
	if _, err := admit(bob); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "kept for admin tokens") {
		t.Fatalf("bob's second: %v", err)
	}
	take(root)
	if _, err := admit(root); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "every run slot is taken") {
		t.Fatalf("root past every slot: %v", err)
	}
	for _, tk := range held {
		tk.Release()
	}
	// No owner: every slot.
	var anon []*Ticket
	for i := range 4 {
		tk, err := admit(Owner{})
		if err != nil {
			t.Fatalf("anonymous %d: %v", i, err)
		}
		anon = append(anon, tk)
	}
	for _, tk := range anon {
		tk.Release()
	}
	// With one slot, nothing is reserved and the share is that slot.
	one := captureEngine(t, Options{MaxRuns: 1, ReservedRuns: 1})
	tk, err := one.Admit(context.Background(), alice, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatalf("one slot: %v", err)
	}
	tk.Release()
}

// TestAdmissionQueue: a run that finds no slot waits in the queue and is
// admitted when one frees; past the queue's depth or its wait it is busy,
// and a cancelled wait ends at once. The observer hears of each wait.
func TestAdmissionQueue(t *testing.T) {
	var mu sync.Mutex
	var waits []bool
	e := captureEngine(t, Options{MaxRuns: 1, QueueDepth: 1, QueueWait: time.Hour,
		AdmissionObserver: func(_ time.Duration, admitted bool) { mu.Lock(); waits = append(waits, admitted); mu.Unlock() }})
	ctx := context.Background()
	held, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		tk, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
		if err == nil {
			tk.Release()
		}
		got <- err
	}()
	for e.Admission().Queued != 1 {
		time.Sleep(time.Millisecond)
	}
	// The queue is full: the next is refused at once.
	if _, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "queue is full") {
		t.Fatalf("past the queue's depth: %v", err)
	}
	held.Release()
	if err := <-got; err != nil {
		t.Fatalf("the queued run was not admitted when the slot freed: %v", err)
	}
	// A wait that passes, and one that is cancelled.
	short := captureEngine(t, Options{MaxRuns: 1, QueueDepth: 4, QueueWait: 50 * time.Millisecond})
	h2, _ := short.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
	defer h2.Release()
	if _, err := short.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "after waiting") {
		t.Fatalf("past the wait: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := short.Admit(cctx, Owner{}, sandbox.Selection{}, sandbox.Spec{}); err == nil || sandbox.CodeOf(err) != "interrupted" {
		t.Fatalf("a cancelled wait: %v", err)
	}
	if q := short.Admission().Queued; q != 0 {
		t.Errorf("%d runs still counted in the queue", q)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 || !waits[0] || !waits[1] { // the held run and the queued one; the refused one never queued
		t.Errorf("observer heard %v", waits)
	}
}

// quotaBackend is a remote backend that says its capacity (a cluster's
// quota, as the kubernetes backend reads it).
type quotaBackend struct {
	capture
	runs atomic.Int64
}

func (*quotaBackend) Name() string { return "t-quota" }
func (*quotaBackend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Remote: true}
}
func (q *quotaBackend) Capacity(context.Context) (sandbox.Capacity, error) {
	return sandbox.Capacity{Runs: int(q.runs.Load()), Source: "the quota q"}, nil
}

var quota = &quotaBackend{}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-quota", New: func(sandbox.Settings) (sandbox.Backend, error) { return quota, nil }})
}

// TestLanes: without server.max_runs, a remote backend's runs are admitted
// by the capacity it says (more than this host's cores when it says so)
// and refused past it naming where it came from, apart from the host's
// lane; server.max_runs makes one lane of every backend again; a capacity
// past maxRemoteRuns is held to it; a lane made smaller holds what runs
// and admits below it only; a ticket follows its run to another lane.
func TestLanes(t *testing.T) {
	cores := runtime.NumCPU()
	quota.runs.Store(int64(cores + 3))
	e, err := New(Options{Backends: []string{"t-capture", "t-quota"}, Backend: "auto", Preference: []string{"t-capture"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	caps := map[string]*Lane{}
	for _, c := range e.Report(ctx).Candidates { // probes, and so asks t-quota
		caps[c.Name] = c.Capacity
	}
	if l := caps["t-quota"]; l == nil || l.Name != "t-quota" || l.Slots != cores+3 || l.Source != "the quota q" {
		t.Fatalf("t-quota's capacity in the report: %+v", l)
	}
	if l := caps["t-capture"]; l == nil || l.Name != HostLane || l.Slots != cores || !strings.Contains(l.Source, "cores") {
		t.Fatalf("t-capture's capacity in the report: %+v", l)
	}
	remote := sandbox.Selection{Backend: "t-quota"}
	var held []*Ticket
	defer func() {
		for _, tk := range held {
			tk.Release()
		}
	}()
	for i := range cores + 3 {
		tk, err := e.Admit(ctx, Owner{}, remote, sandbox.Spec{})
		if err != nil {
			t.Fatalf("remote run %d of %d: %v", i+1, cores+3, err)
		}
		held = append(held, tk)
	}
	if _, err := e.Admit(ctx, Owner{}, remote, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) ||
		!strings.Contains(err.Error(), fmt.Sprintf("every run slot of backend t-quota is taken (%d: the quota q)", cores+3)) {
		t.Fatalf("a run past the quota: %v", err)
	}
	// The host's lane is the host's: all its slots are free.
	for i := range cores {
		tk, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
		if err != nil {
			t.Fatalf("host run %d beside a full remote lane: %v", i+1, err)
		}
		held = append(held, tk)
	}
	if _, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "every run slot is taken") {
		t.Fatalf("a host run past its cores: %v", err)
	}
	if st := e.Admission(); st.Slots != 2*cores+3 || st.SlotsInUse != 2*cores+3 || len(st.Lanes) != 2 {
		t.Fatalf("admission stats %+v", st)
	}

	// A Run ends its ticket: the remote lane admits again. A smaller
	// capacity (probed again) holds what runs, and admits below it only.
	held[0].Release()
	res, err := e.Run(ctx, remote, sandbox.Spec{}, &sandbox.Process{Args: []string{"true"}})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("a run in the freed remote slot: %v %+v", err, res)
	}
	quota.runs.Store(2)
	e.ProbeAll(ctx, nil)
	if _, err := e.Admit(ctx, Owner{}, remote, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "(2: the quota q)") {
		t.Fatalf("a lane made smaller than what it holds: %v", err)
	}
	for _, tk := range held[1 : cores+2] { // leaves one remote run
		tk.Release()
	}
	tk, err := e.Admit(ctx, Owner{}, remote, sandbox.Spec{})
	if err != nil {
		t.Fatalf("a second run in a lane of 2: %v", err)
	}
	held = append(held, tk)
	if _, err := e.Admit(ctx, Owner{}, remote, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("a third run in a lane of 2: %v", err)
	}

	// A ticket admitted in the host's lane (auto picks t-capture) whose
	// run goes to t-quota takes a slot there, and gives the host's back;
	// while t-quota's lane is full it is refused and keeps the host's.
	for _, tk := range held[cores+3 : 2*cores+3] {
		tk.Release()
	}
	inUse := func(name string) int {
		for _, l := range e.Admission().Lanes {
			if l.Name == name {
				return l.InUse
			}
		}
		return -1
	}
	moving, err := e.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, moving)
	if _, err := moving.Run(ctx, remote, &sandbox.Process{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrBusy) ||
		inUse(HostLane) != 1 || inUse("t-quota") != 2 {
		t.Fatalf("a run moving to a full lane: %v; host lane holds %d, t-quota's %d", err, inUse(HostLane), inUse("t-quota"))
	}
	tk.Release()
	if res, err := moving.Run(ctx, remote, &sandbox.Process{Args: []string{"true"}}); err != nil || res.ExitCode != 3 ||
		inUse(HostLane) != 0 || inUse("t-quota") != 2 {
		t.Fatalf("a run moving to a lane with room: %v %+v; host lane holds %d, t-quota's %d", err, res, inUse(HostLane), inUse("t-quota"))
	}
	moving.Release()
	if inUse("t-quota") != 1 {
		t.Fatalf("the moved ticket released: t-quota's lane holds %d", inUse("t-quota"))
	}

	// server.max_runs: one lane for both.
	fixed, err := New(Options{Backends: []string{"t-capture", "t-quota"}, Backend: "auto", Preference: []string{"t-capture"}, MaxRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fixed.Close)
	fixed.Report(ctx)
	a, _ := fixed.Admit(ctx, Owner{}, remote, sandbox.Spec{})
	b, _ := fixed.Admit(ctx, Owner{}, sandbox.Selection{}, sandbox.Spec{})
	if _, err := fixed.Admit(ctx, Owner{}, remote, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "(2: server.max_runs 2)") {
		t.Fatalf("server.max_runs 2, a third run: %v", err)
	}
	a.Release()
	b.Release()

	// A capacity past the bound is held to it, and the server's result
	// memory bounds a large lane's runs as the host's: results come back
	// to this server wherever the runs are.
	quota.runs.Store(1 << 20)
	p, err := e.Plan(sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	per := p.Limits().ResultBytes()
	big, err := New(Options{Backends: []string{"t-quota"}, Backend: "t-quota", ResultMemory: 3 * per})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(big.Close)
	if l := big.Report(ctx).Candidates[0].Capacity; l.Slots != maxRemoteRuns || !strings.Contains(l.Source, "at most 1024") {
		t.Fatalf("a capacity of 1<<20: %+v", l)
	}
	for range 3 {
		tk, err := big.Admit(ctx, Owner{}, remote, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Release()
	}
	if _, err := big.Admit(ctx, Owner{}, remote, sandbox.Spec{}); !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), "server.max_result_memory") {
		t.Fatalf("a fourth run in a lane of 1024 with result memory for 3: %v", err)
	}
}
