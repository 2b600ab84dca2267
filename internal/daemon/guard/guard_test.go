package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newGuard(t *testing.T, c Config) (*Guard, *clock) {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	g.now = clk.now
	return g, clk
}

// wait is a generous bound for things that should happen at once.
const wait = 10 * time.Second

type result struct {
	pass *Pass
	err  error
}

// admitAsync runs Admit in a goroutine; the approval it holds, if any,
// arrives on the first channel.
func admitAsync(ctx context.Context, g *Guard, c Call) (<-chan Approval, <-chan result) {
	held := make(chan Approval, 1)
	done := make(chan result, 1)
	go func() {
		p, err := g.Admit(ctx, c, func(a Approval) { held <- a })
		done <- result{p, err}
	}()
	return held, done
}

func heldOf(t *testing.T, held <-chan Approval) Approval {
	t.Helper()
	select {
	case a := <-held:
		return a
	case <-time.After(wait):
		t.Fatal("call not held for approval")
	}
	panic("unreachable")
}

func resultOf(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(wait):
		t.Fatal("Admit did not return")
	}
	panic("unreachable")
}

// wantErr checks err's kind, code and that its message holds every part.
func wantErr(t *testing.T, err error, kind *sandbox.Kind, code string, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s", code)
	}
	if !errors.Is(err, kind) || sandbox.CodeOf(err) != code {
		t.Fatalf("err = %v (kind %v, code %s), want kind %v, code %s", err, sandbox.KindOf(err), sandbox.CodeOf(err), kind, code)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("err = %q, want it to mention %q", err, p)
		}
	}
}

func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		t.Fatalf("err %v has no RetryAfter", err)
	}
	return ra.RetryAfter()
}

func TestRules(t *testing.T) {
	cfg := Config{Rules: []Rule{
		{Name: "no-shell", Action: Deny, Tools: []string{"shell"}},
		{Name: "shell-ok", Action: Allow, Tools: []string{"shell", "fetch"}}, // never reached for shell
		{Name: "anon-py", Action: Allow, Tokens: []string{""}, Languages: []string{"python"}},
		{Name: "ci-any", Action: Allow, Tokens: []string{"ci"}, Operations: []string{"*"}},
		{Name: "gvisor-run", Action: Allow, Operations: []string{"run", "session"}, Backends: []string{"gvisor"}},
		{Name: "lint", Action: Allow, Operations: []string{"lint"}},
	}, Default: Deny}
	g, _ := newGuard(t, cfg)
	cases := []struct {
		call Call
		rule string // "" with deny = refused
		deny string // the rule named in the refusal
	}{
		{Call{Token: "ci", Operation: "tool", Tool: "shell"}, "", "no-shell"}, // first match wins over ci-any
		{Call{Token: "alice", Operation: "tool", Tool: "fetch"}, "shell-ok", ""},
		{Call{Token: "", Operation: "run", Language: "python"}, "anon-py", ""},
		{Call{Token: "alice", Operation: "run", Language: "python"}, "", "default"}, // "" is not a wildcard
		{Call{Token: "", Operation: "run", Language: "node"}, "", "default"},
		{Call{Token: "ci", Operation: "session_exec"}, "ci-any", ""},
		{Call{Token: "bob", Operation: "session", Backend: "gvisor"}, "gvisor-run", ""},
		{Call{Token: "bob", Operation: "function", Backend: "gvisor"}, "", "default"}, // every list must match
		{Call{Token: "bob", Operation: "run", Backend: "docker"}, "", "default"},
		{Call{Token: "bob", Operation: "lint", Language: "python"}, "lint", ""},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%+v", tc.call), func(t *testing.T) {
			p, err := g.Admit(context.Background(), tc.call, nil)
			switch tc.deny {
			case "":
				if err != nil {
					t.Fatal(err)
				}
				if p.Rule() != tc.rule {
					t.Errorf("Rule() = %q, want %q", p.Rule(), tc.rule)
				}
			case "default":
				wantErr(t, err, sandbox.ErrDenied, CodeDenied, "default")
			default:
				wantErr(t, err, sandbox.ErrDenied, CodeDenied, fmt.Sprintf("%q", tc.deny))
			}
		})
	}
}

func TestDefaultAllow(t *testing.T) {
	g, _ := newGuard(t, Config{Rules: []Rule{{Name: "x", Action: Deny, Tools: []string{"x"}}}})
	p, err := g.Admit(context.Background(), Call{Operation: "run"}, nil)
	if err != nil || p.Rule() != "" {
		t.Fatalf("Admit = %v, %v; want the default's Pass", p, err)
	}
}

func TestOpen(t *testing.T) {
	var nilGuard *Guard
	zero, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*Guard{"nil": nilGuard, "zero": zero} {
		t.Run(name, func(t *testing.T) {
			p, err := g.Admit(context.Background(), Call{Operation: "tool", Tool: "anything"}, func(Approval) { t.Error("notified") })
			if err != nil || p == nil {
				t.Fatalf("Admit = %v, %v; want a Pass", p, err)
			}
			p.Charge(time.Hour)
			p.Charge(time.Hour)
			if len(g.Pending()) != 0 {
				t.Error("Pending not empty")
			}
			wantErr(t, g.Decide("x", true, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)
		})
	}
	var p *Pass
	p.Charge(time.Second)
	if p.Rule() != "" {
		t.Error("nil Pass has a rule")
	}
}

func TestValidate(t *testing.T) {
	ok := func(c Config) Config { return c }
	budget := Budget{Name: "b", Window: time.Hour, Executions: 1}
	cases := []struct {
		name string
		cfg  Config
		want []string // nil: valid
	}{
		{"zero", Config{}, nil},
		{"full", Config{
			Rules:     []Rule{{Name: "a", Action: Confirm, Operations: []string{"run", "function", "lint", "tool", "session", "session_exec", "*"}}},
			Default:   Deny,
			Budgets:   []Budget{{Name: "b", Window: 1, CPU: 1}, {Name: "c", Tokens: []string{"x"}, Window: time.Hour, Executions: 1}},
			Approvals: Approvals{Timeout: 24 * time.Hour, MaxPending: 10000},
		}, nil},
		{"default", Config{Default: "block"}, []string{`default: unknown action "block"`}},
		{"action", Config{Rules: []Rule{{Name: "r", Action: "Allow"}}}, []string{`rules[0] "r": unknown action "Allow"`}},
		{"no action", Config{Rules: []Rule{{Name: "r"}}}, []string{`rules[0] "r": unknown action ""`}},
		{"no name", Config{Rules: []Rule{{Action: Allow}}}, []string{"rules[0]: name is required"}},
		{"dup name", Config{Rules: []Rule{{Name: "r", Action: Allow}, {Name: "s", Action: Allow}, {Name: "r", Action: Deny}}}, []string{`rules[2] "r": name already used by rules[0]`}},
		{"operation", Config{Rules: []Rule{{Name: "r", Action: Allow, Operations: []string{"run", "exec"}}}}, []string{`rules[0] "r": unknown operation "exec"`}},
		{"empty operation", Config{Rules: []Rule{{Name: "r", Action: Allow, Operations: []string{""}}}}, []string{`unknown operation ""`}},
		{"budget name", Config{Budgets: []Budget{{Window: time.Hour, Executions: 1}}}, []string{"budgets[0]: name is required"}},
		{"budget dup", Config{Budgets: []Budget{budget, budget}}, []string{`budgets[1] "b": name already used by budgets[0]`}},
		{"rule and budget may share a name", ok(Config{Rules: []Rule{{Name: "b", Action: Allow}}, Budgets: []Budget{budget}}), nil},
		{"window 0", Config{Budgets: []Budget{{Name: "b", Executions: 1}}}, []string{`budgets[0] "b": window must be above 0`}},
		{"window negative", Config{Budgets: []Budget{{Name: "b", Window: -time.Second, Executions: 1}}}, []string{"window must be above 0"}},
		{"executions negative", Config{Budgets: []Budget{{Name: "b", Window: time.Hour, Executions: -1, CPU: time.Second}}}, []string{"executions must not be negative"}},
		{"cpu negative", Config{Budgets: []Budget{{Name: "b", Window: time.Hour, Executions: 1, CPU: -1}}}, []string{"cpu must not be negative"}},
		{"limits nothing", Config{Budgets: []Budget{{Name: "b", Window: time.Hour}}}, []string{`budgets[0] "b": limits nothing`}},
		{"timeout negative", Config{Approvals: Approvals{Timeout: -1}}, []string{"approvals.timeout"}},
		{"timeout too long", Config{Approvals: Approvals{Timeout: 24*time.Hour + 1}}, []string{"approvals.timeout", "at most 24h"}},
		{"pending negative", Config{Approvals: Approvals{MaxPending: -1}}, []string{"approvals.max_pending"}},
		{"pending too many", Config{Approvals: Approvals{MaxPending: 10001}}, []string{"approvals.max_pending", "at most 10000"}},
		{"share at its bound", Config{Approvals: Approvals{MaxPendingPerToken: 10000, AdminPending: 10000}}, nil},
		{"share negative", Config{Approvals: Approvals{MaxPendingPerToken: -1}}, []string{"approvals.max_pending_per_token"}},
		{"share too large", Config{Approvals: Approvals{MaxPendingPerToken: 10001}}, []string{"approvals.max_pending_per_token", "at most 10000"}},
		{"admin places negative", Config{Approvals: Approvals{AdminPending: -1}}, []string{"approvals.admin_pending"}},
		{"admin places too many", Config{Approvals: Approvals{AdminPending: 10001}}, []string{"approvals.admin_pending", "0 to 10000"}},
		{"every problem", Config{
			Default: "x",
			Rules:   []Rule{{Action: "y"}},
			Budgets: []Budget{{Name: "b"}},
		}, []string{"default:", "rules[0]: name is required", `rules[0] "": unknown action "y"`, "window must be above 0", "limits nothing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, sandbox.ErrInvalid, CodeInvalid, tc.want...)
			if _, nerr := New(tc.cfg); nerr == nil {
				t.Error("New accepted what Validate refuses")
			}
		})
	}
}

func TestNewCopies(t *testing.T) {
	tools := []string{"shell"}
	cfg := Config{Rules: []Rule{{Name: "r", Action: Deny, Tools: tools}}}
	g, _ := newGuard(t, cfg)
	tools[0] = "other"
	_, err := g.Admit(context.Background(), Call{Operation: "tool", Tool: "shell"}, nil)
	wantErr(t, err, sandbox.ErrDenied, CodeDenied, `"r"`)
}

var confirmTools = Config{Rules: []Rule{{Name: "ask", Action: Confirm, Operations: []string{"tool"}}}}

func TestConfirmApproved(t *testing.T) {
	g, clk := newGuard(t, confirmTools)
	call := Call{Token: "alice", Operation: "tool", Tool: "shell", RunID: "r1", NodeName: "n", ToolCallID: "tc"}
	notified := 0
	var a Approval
	p, err := g.Admit(context.Background(), call, func(got Approval) {
		notified++
		a = got
		pend := g.Pending()
		if len(pend) != 1 || pend[0] != got {
			t.Errorf("Pending() = %+v, want [%+v]", pend, got)
		}
		if err := g.Decide(got.ID, true, "op", "fine"); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if notified != 1 || p.Rule() != "ask" {
		t.Fatalf("notified %d times, Rule() = %q", notified, p.Rule())
	}
	if a.Call != call || a.Rule != "ask" || !a.Created.Equal(clk.now()) || !a.Expires.Equal(clk.now().Add(5*time.Minute)) || len(a.ID) != 32 {
		t.Errorf("approval = %+v", a)
	}
	if len(g.Pending()) != 0 {
		t.Error("decided approval still pending")
	}
	wantErr(t, g.Decide(a.ID, true, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)
	wantErr(t, g.Decide(a.ID, false, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)

	// A call no rule holds is not notified.
	if _, err := g.Admit(context.Background(), Call{Operation: "run"}, func(Approval) { t.Error("notified") }); err != nil {
		t.Fatal(err)
	}
}

func TestConfirmDefault(t *testing.T) {
	g, _ := newGuard(t, Config{Default: Confirm})
	held, done := admitAsync(context.Background(), g, Call{Operation: "run"})
	a := heldOf(t, held)
	if a.Rule != "" {
		t.Errorf("Rule = %q, want the default's", a.Rule)
	}
	if err := g.Decide(a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, done); r.err != nil || r.pass.Rule() != "" {
		t.Fatalf("Admit = %v, %v", r.pass, r.err)
	}
}

func TestConfirmDenied(t *testing.T) {
	g, _ := newGuard(t, confirmTools)
	held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
	a := heldOf(t, held)
	if err := g.Decide(a.ID, false, "carol", "not today"); err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, done)
	wantErr(t, r.err, sandbox.ErrDenied, CodeApprovalDenied, a.ID, `"carol"`, "not today")
	if r.pass != nil {
		t.Error("a refusal has a Pass")
	}

	held, done = admitAsync(context.Background(), g, Call{Operation: "tool"})
	a = heldOf(t, held)
	if err := g.Decide(a.ID, false, "", strings.Repeat("é", 5000)); err != nil {
		t.Fatal(err)
	}
	r = resultOf(t, done)
	wantErr(t, r.err, sandbox.ErrDenied, CodeApprovalDenied, "an operator")
	if len(r.err.Error()) > 1200 {
		t.Errorf("reason not bounded: %d bytes", len(r.err.Error()))
	}
}

func TestConfirmExpires(t *testing.T) {
	cfg := confirmTools
	cfg.Approvals.Timeout = 20 * time.Millisecond
	g, _ := newGuard(t, cfg)
	held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
	a := heldOf(t, held)
	r := resultOf(t, done)
	wantErr(t, r.err, sandbox.ErrDenied, CodeApprovalExpired, a.ID, "20ms")
	if len(g.Pending()) != 0 {
		t.Error("expired approval still pending")
	}
	wantErr(t, g.Decide(a.ID, true, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)
}

// An approval expires on the guard's clock too, not only on its timer.
func TestConfirmExpiresOnClock(t *testing.T) {
	cfg := confirmTools
	cfg.Approvals.Timeout = time.Hour
	g, clk := newGuard(t, cfg)

	held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
	a := heldOf(t, held)
	clk.add(time.Hour - 1)
	if len(g.Pending()) != 1 {
		t.Fatal("approval gone before it expired")
	}
	if err := g.Decide(a.ID, true, "", ""); err != nil {
		t.Fatalf("Decide 1ns before expiry: %v", err)
	}
	if r := resultOf(t, done); r.err != nil {
		t.Fatal(r.err)
	}

	held, done = admitAsync(context.Background(), g, Call{Operation: "tool"})
	a = heldOf(t, held)
	clk.add(time.Hour)
	wantErr(t, g.Decide(a.ID, true, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)
	wantErr(t, resultOf(t, done).err, sandbox.ErrDenied, CodeApprovalExpired)

	held, done = admitAsync(context.Background(), g, Call{Operation: "tool"})
	heldOf(t, held)
	clk.add(time.Hour)
	if len(g.Pending()) != 0 {
		t.Error("expired approval listed")
	}
	wantErr(t, resultOf(t, done).err, sandbox.ErrDenied, CodeApprovalExpired)
}

func TestConfirmCanceled(t *testing.T) {
	g, _ := newGuard(t, confirmTools)
	ctx, cancel := context.WithCancel(context.Background())
	held, done := admitAsync(ctx, g, Call{Operation: "tool"})
	a := heldOf(t, held)
	cancel()
	r := resultOf(t, done)
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, sandbox.ErrUnavailable) {
		t.Fatalf("err = %v, want canceled", r.err)
	}
	if len(g.Pending()) != 0 {
		t.Error("abandoned approval still pending")
	}
	wantErr(t, g.Decide(a.ID, true, "", ""), sandbox.ErrNotFound, CodeApprovalNotFound)
}

func TestMaxPending(t *testing.T) {
	cfg := confirmTools
	cfg.Approvals = Approvals{Timeout: time.Hour, MaxPending: 2}
	g, clk := newGuard(t, cfg)
	var ids []string
	var dones []<-chan result
	for range 2 {
		held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
		ids = append(ids, heldOf(t, held).ID)
		dones = append(dones, done)
		clk.add(time.Minute)
	}
	if p := g.Pending(); len(p) != 2 || p[0].ID != ids[0] || p[1].ID != ids[1] {
		t.Fatalf("Pending() = %+v, want %v in order", p, ids)
	}
	_, err := g.Admit(context.Background(), Call{Operation: "tool"}, func(Approval) { t.Error("notified") })
	wantErr(t, err, sandbox.ErrBusy, CodeApprovalsFull, "2 calls")
	if got := retryAfter(t, err); got != 58*time.Minute { // the first expires 60m after it came, 2m ago
		t.Errorf("RetryAfter = %s, want 58m", got)
	}
	// Calls that are not held are not affected.
	if _, err := g.Admit(context.Background(), Call{Operation: "run"}, nil); err != nil {
		t.Fatal(err)
	}

	if err := g.Decide(ids[0], true, "", ""); err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, dones[0]); r.err != nil {
		t.Fatal(r.err)
	}
	held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
	a := heldOf(t, held)
	for _, id := range []string{ids[1], a.ID} {
		if err := g.Decide(id, false, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	resultOf(t, dones[1])
	resultOf(t, done)
}

// Places to wait are shared as run slots are: a plain token waits within
// its share and outside the admin's places; an admin's calls take any
// free one. Each bound is tried at it and one past it.
func TestPendingShares(t *testing.T) {
	cfg := confirmTools
	cfg.Approvals = Approvals{Timeout: time.Hour, MaxPending: 4, MaxPendingPerToken: 2, AdminPending: 1}
	g, clk := newGuard(t, cfg)
	var ids []string
	hold := func(c Call) {
		t.Helper()
		held, _ := admitAsync(context.Background(), g, c)
		ids = append(ids, heldOf(t, held).ID)
		clk.add(time.Minute)
	}
	refused := func(c Call, after time.Duration, parts ...string) {
		t.Helper()
		_, err := g.Admit(context.Background(), c, func(a Approval) {
			t.Error("held, not refused")
			g.Decide(a.ID, false, "", "") // not waited for
		})
		wantErr(t, err, sandbox.ErrBusy, CodeApprovalsFull, parts...)
		if got := retryAfter(t, err); got != after {
			t.Errorf("RetryAfter = %s, want %s", got, after)
		}
	}
	alice, bob := Call{Token: "alice", Operation: "tool"}, Call{Token: "bob", Operation: "tool"}
	root := Call{Token: "root", Admin: true, Operation: "tool"}
	hold(alice)
	hold(alice) // at its share
	refused(alice, 58*time.Minute, "token alice has 2 calls", "max_pending_per_token")
	hold(bob) // the last place not kept for admins
	refused(bob, 57*time.Minute, "kept for admin tokens", "admin_pending")
	hold(root) // an admin's call takes the kept place
	refused(root, 56*time.Minute, "4 calls already wait", "max_pending")
	refused(Call{Operation: "tool"}, 56*time.Minute, "4 calls already wait") // no token: the whole bound only
	// One decision leaves the kept place kept; two free one for alice,
	// within her share again.
	if err := g.Decide(ids[0], false, "root", ""); err != nil {
		t.Fatal(err)
	}
	refused(alice, 57*time.Minute, "kept for admin tokens")
	if err := g.Decide(ids[2], false, "root", ""); err != nil {
		t.Fatal(err)
	}
	hold(alice)
	ids = slices.Delete(ids, 0, 1)
	ids = slices.Delete(ids, 1, 2)
	for _, id := range ids {
		if err := g.Decide(id, false, "root", ""); err != nil {
			t.Fatal(err)
		}
	}

	// Defaults: half of max_pending each (at least 1); the kept places
	// leave at least one for everyone.
	for _, tc := range []struct{ max, share, admin, plain int }{{5, 0, 0, 3}, {1, 0, 0, 1}, {1, 0, 5, 1}, {4, 4, 2, 2}} {
		cfg.Approvals = Approvals{Timeout: time.Hour, MaxPending: tc.max, MaxPendingPerToken: tc.share, AdminPending: tc.admin}
		g, _ := newGuard(t, cfg)
		held := 0
		for ; held <= tc.max; held++ {
			h, done := admitAsync(context.Background(), g, alice)
			select {
			case a := <-h:
				defer g.Decide(a.ID, false, "root", "")
				continue
			case r := <-done:
				wantErr(t, r.err, sandbox.ErrBusy, CodeApprovalsFull)
			}
			break
		}
		if held != tc.plain {
			t.Errorf("%+v: a plain token held %d calls, want %d", cfg.Approvals, held, tc.plain)
		}
	}
}

// The token whose call waits may not approve it, unless self_approve:
// the call stays held for another; denying one's own is allowed.
func TestSelfApproval(t *testing.T) {
	g, _ := newGuard(t, confirmTools)
	for _, by := range []string{"alice", "bob"} {
		held, done := admitAsync(context.Background(), g, Call{Token: "alice", Admin: true, Operation: "tool"})
		a := heldOf(t, held)
		wantErr(t, g.Decide(a.ID, true, "alice", ""), sandbox.ErrDenied, CodeSelfApproval, `token "alice"`, "self_approve")
		if p := g.Pending(); len(p) != 1 || p[0].ID != a.ID {
			t.Fatalf("after a refused self-approval Pending() = %+v", p)
		}
		if by == "alice" {
			if err := g.Decide(a.ID, false, "alice", "changed my mind"); err != nil {
				t.Fatal(err)
			}
			wantErr(t, resultOf(t, done).err, sandbox.ErrDenied, CodeApprovalDenied, "changed my mind")
			continue
		}
		if err := g.Decide(a.ID, true, by, ""); err != nil {
			t.Fatal(err)
		}
		if r := resultOf(t, done); r.err != nil {
			t.Fatal(r.err)
		}
	}
	cfg := confirmTools
	cfg.Approvals.SelfApprove = true
	g, _ = newGuard(t, cfg)
	held, done := admitAsync(context.Background(), g, Call{Token: "alice", Operation: "tool"})
	if err := g.Decide(heldOf(t, held).ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, done); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestDecideUnknown(t *testing.T) {
	g, _ := newGuard(t, confirmTools)
	held, done := admitAsync(context.Background(), g, Call{Operation: "tool"})
	a := heldOf(t, held)
	for _, id := range []string{"", "nope", a.ID[:31], strings.ToUpper(a.ID), strings.Repeat("x", 10000)} {
		err := g.Decide(id, true, "", "")
		wantErr(t, err, sandbox.ErrNotFound, CodeApprovalNotFound)
		if len(err.Error()) > 200 {
			t.Errorf("message not bounded: %d bytes", len(err.Error()))
		}
	}
	if len(g.Pending()) != 1 {
		t.Fatal("a wrong id touched the approval")
	}
	g.Decide(a.ID, false, "", "")
	resultOf(t, done)
}

func TestIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newID()
		if len(id) != 32 || seen[id] {
			t.Fatalf("id %q: short or repeated", id)
		}
		seen[id] = true
	}
}

func TestBudgetExecutions(t *testing.T) {
	g, clk := newGuard(t, Config{Budgets: []Budget{{Name: "hourly", Window: time.Hour, Executions: 3}}})
	call := Call{Token: "alice", Operation: "run"}
	for i := range 3 {
		if _, err := g.Admit(context.Background(), call, nil); err != nil {
			t.Fatalf("execution %d: %v", i+1, err)
		}
		clk.add(10 * time.Minute)
	}
	_, err := g.Admit(context.Background(), call, nil)
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, `"hourly"`, `"alice"`, "3 of 3 executions", "1h0m0s window", "30m0s")
	if got := retryAfter(t, err); got != 30*time.Minute {
		t.Errorf("RetryAfter = %s, want 30m (the window started at the first execution)", got)
	}

	clk.add(30*time.Minute - 1)
	_, err = g.Admit(context.Background(), call, nil)
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted)
	if got := retryAfter(t, err); got != 1 {
		t.Errorf("RetryAfter = %s, want 1ns", got)
	}

	// The window ends: a fresh one starts with the next call.
	clk.add(1)
	if _, err := g.Admit(context.Background(), call, nil); err != nil {
		t.Fatalf("new window: %v", err)
	}
	clk.add(time.Minute)
	for range 2 {
		if _, err := g.Admit(context.Background(), call, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = g.Admit(context.Background(), call, nil)
	if got := retryAfter(t, err); got != 59*time.Minute {
		t.Errorf("RetryAfter = %s, want 59m", got)
	}
}

func TestBudgetCPU(t *testing.T) {
	g, clk := newGuard(t, Config{Budgets: []Budget{{Name: "cpu", Window: time.Minute, CPU: 2 * time.Second}}})
	call := Call{Operation: "run"}
	admit := func() (*Pass, error) { return g.Admit(context.Background(), call, nil) }

	p, err := admit()
	if err != nil {
		t.Fatal(err)
	}
	p.Charge(time.Second)
	p.Charge(time.Hour) // once only
	p.Charge(-time.Hour)
	p, err = admit()
	if err != nil {
		t.Fatal(err)
	}
	p.Charge(time.Second - 1)
	// 2s - 1ns used: still room.
	p, err = admit()
	if err != nil {
		t.Fatalf("below the CPU budget: %v", err)
	}
	p.Charge(1)
	_, err = admit()
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, `"cpu"`, `""`, "2s of 2s CPU time", "1m0s window")
	clk.add(time.Minute)
	if _, err := admit(); err != nil {
		t.Fatalf("new window: %v", err)
	}
}

// A Pass charges the window that counted it, even when a new one has begun.
func TestBudgetChargeOldWindow(t *testing.T) {
	g, clk := newGuard(t, Config{Budgets: []Budget{{Name: "cpu", Window: time.Minute, CPU: time.Second}}})
	old, err := g.Admit(context.Background(), Call{Operation: "run"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	if _, err := g.Admit(context.Background(), Call{Operation: "run"}, nil); err != nil {
		t.Fatal(err)
	}
	old.Charge(time.Hour)
	if _, err := g.Admit(context.Background(), Call{Operation: "run"}, nil); err != nil {
		t.Fatalf("old run charged the new window: %v", err)
	}
}

func TestBudgetPerToken(t *testing.T) {
	g, _ := newGuard(t, Config{Budgets: []Budget{
		{Name: "each", Window: time.Hour, Executions: 1},
		{Name: "bob-only", Tokens: []string{"bob"}, Window: time.Hour, Executions: 2},
	}})
	admit := func(token string) error {
		_, err := g.Admit(context.Background(), Call{Token: token, Operation: "run"}, nil)
		return err
	}
	for _, tok := range []string{"alice", "bob", ""} {
		if err := admit(tok); err != nil {
			t.Fatalf("%q: %v", tok, err)
		}
	}
	for _, tok := range []string{"alice", "bob", ""} {
		wantErr(t, admit(tok), sandbox.ErrBusy, CodeBudgetExhausted, `"each"`, fmt.Sprintf("%q", tok))
	}

	// bob-only applies to bob alone, and a refused call counts nowhere.
	g, _ = newGuard(t, Config{Budgets: []Budget{
		{Name: "bob-only", Tokens: []string{"bob"}, Window: time.Hour, Executions: 1},
		{Name: "all", Tokens: []string{"*"}, Window: time.Hour, Executions: 3},
	}})
	if err := admit("bob"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, admit("bob"), sandbox.ErrBusy, CodeBudgetExhausted, `"bob-only"`)
	wantErr(t, admit("bob"), sandbox.ErrBusy, CodeBudgetExhausted, `"bob-only"`)
	for range 3 {
		if err := admit("alice"); err != nil {
			t.Fatalf("alice: %v (bob's refusals counted in all?)", err)
		}
	}
	wantErr(t, admit("alice"), sandbox.ErrBusy, CodeBudgetExhausted, `"all"`)
}

// The RetryAfter of several exhausted budgets is when all have room.
func TestBudgetRetryAfterLatest(t *testing.T) {
	g, clk := newGuard(t, Config{Budgets: []Budget{
		{Name: "short", Window: time.Minute, Executions: 1},
		{Name: "long", Window: time.Hour, Executions: 1},
	}})
	if _, err := g.Admit(context.Background(), Call{Operation: "run"}, nil); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	_, err := g.Admit(context.Background(), Call{Operation: "run"}, nil)
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, `"short"`)
	if got := retryAfter(t, err); got != time.Hour-time.Second {
		t.Errorf("RetryAfter = %s, want 59m59s", got)
	}
}

// A held call spends no budget; its budget is checked once approved.
func TestBudgetAfterApproval(t *testing.T) {
	cfg := confirmTools
	cfg.Budgets = []Budget{{Name: "one", Window: time.Hour, Executions: 1}}
	g, _ := newGuard(t, cfg)
	held, done := admitAsync(context.Background(), g, Call{Token: "alice", Operation: "tool"})
	a := heldOf(t, held)
	if _, err := g.Admit(context.Background(), Call{Token: "alice", Operation: "run"}, nil); err != nil {
		t.Fatalf("the held call spent the budget: %v", err)
	}
	if err := g.Decide(a.ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, resultOf(t, done).err, sandbox.ErrBusy, CodeBudgetExhausted, `"one"`)

	// With the budget spent, nobody is asked.
	_, err := g.Admit(context.Background(), Call{Token: "alice", Operation: "tool"}, func(Approval) { t.Error("notified") })
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, `"one"`)
	// Another token's approval is counted once approved.
	held, done = admitAsync(context.Background(), g, Call{Token: "bob", Operation: "tool"})
	if err := g.Decide(heldOf(t, held).ID, true, "", ""); err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	_, err = g.Admit(context.Background(), Call{Token: "bob", Operation: "run"}, nil)
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted)
}

func TestBudgetCounterCap(t *testing.T) {
	defer func(n int) { maxCounters = n }(maxCounters)
	maxCounters = 3
	g, clk := newGuard(t, Config{Budgets: []Budget{{Name: "b", Window: time.Hour, Executions: 10}}})
	admit := func(token string) error {
		_, err := g.Admit(context.Background(), Call{Token: token, Operation: "run"}, nil)
		return err
	}
	for _, tok := range []string{"a", "b", "c"} {
		if err := admit(tok); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Minute)
	}
	err := admit("d")
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, "3 budget windows")
	if got := retryAfter(t, err); got != 57*time.Minute {
		t.Errorf("RetryAfter = %s, want 57m (when a's window ends)", got)
	}
	if err := admit("a"); err != nil {
		t.Fatalf("a known token refused at the cap: %v", err)
	}
	clk.add(57 * time.Minute)
	if err := admit("d"); err != nil {
		t.Fatalf("an ended window not dropped: %v", err)
	}
	if n := len(g.counters); n != 3 {
		t.Errorf("%d counters, want 3", n)
	}
	// A sweep after the shortest window drops what ended without a cap.
	clk.add(2 * time.Hour)
	if err := admit("e"); err != nil {
		t.Fatal(err)
	}
	if n := len(g.counters); n != 1 {
		t.Errorf("%d counters after the sweep, want 1", n)
	}
}

// Many callers, operators and cancellations at once; run with -race.
func TestConcurrent(t *testing.T) {
	cfg := Config{
		Rules:     []Rule{{Name: "ask", Action: Confirm, Operations: []string{"tool"}}},
		Budgets:   []Budget{{Name: "b", Window: time.Hour, Executions: 1 << 30, CPU: time.Hour}},
		Approvals: Approvals{Timeout: time.Minute, MaxPending: 8},
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan string, 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			op := "tool"
			if i%4 == 0 {
				op = "run"
			}
			if i%7 == 0 {
				go cancel()
			}
			p, err := g.Admit(ctx, Call{Token: fmt.Sprint(i % 5), Operation: op}, func(a Approval) { held <- a.ID })
			p.Charge(time.Millisecond)
			mu.Lock()
			outcomes[sandbox.CodeOf(err)]++
			mu.Unlock()
		})
	}
	stop := make(chan struct{})
	var ops sync.WaitGroup
	for j := range 4 {
		ops.Go(func() {
			for {
				select {
				case id := <-held:
					g.Decide(id, j%2 == 0, "op", "")
				case <-stop:
					return
				default:
					g.Pending()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	ops.Wait()
	if n := len(g.Pending()); n != 0 {
		t.Errorf("%d approvals left pending", n)
	}
	total := 0
	for code, n := range outcomes {
		switch code {
		case "", CodeApprovalDenied, CodeApprovalsFull, codeInterrupted:
		default:
			t.Errorf("unexpected outcome %s ×%d", code, n)
		}
		total += n
	}
	if total != 200 || outcomes[""] < 50 {
		t.Errorf("outcomes = %v", outcomes)
	}
}

func TestUsesBackends(t *testing.T) {
	var none *Guard
	if none.UsesBackends() {
		t.Error("a nil guard uses backends")
	}
	g, err := New(Config{Rules: []Rule{{Name: "a", Action: Deny, Tools: []string{"x"}}}})
	if err != nil || g.UsesBackends() {
		t.Fatalf("%v: a rule without backends", err)
	}
	g, err = New(Config{Rules: []Rule{{Name: "a", Action: Deny, Tools: []string{"x"}}, {Name: "b", Action: Allow, Backends: []string{"local"}}}})
	if err != nil || !g.UsesBackends() {
		t.Fatalf("%v: a rule with backends", err)
	}
}

func TestConfirms(t *testing.T) {
	for want, c := range map[string]Config{
		"":        {Rules: []Rule{{Name: "a", Action: Deny}}},
		"b":       {Rules: []Rule{{Name: "a", Action: Allow}, {Name: "b", Action: Confirm}, {Name: "c", Action: Confirm}}},
		"default": {Default: Confirm},
	} {
		if got := c.Confirms(); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
}

// A continued call (a terminal's input) is refused by a rule that denies
// it and by an exhausted budget, but is not held by a confirm rule again
// and counts no execution.
func TestContinued(t *testing.T) {
	typing := Call{Token: "alice", Operation: "session_terminal", Language: "command", Continued: true}
	g, _ := newGuard(t, Config{Rules: []Rule{{Name: "ask", Action: Confirm, Operations: []string{"session_terminal"}}}})
	held := false
	if _, err := g.Admit(context.Background(), typing, func(Approval) { held = true }); err != nil || held {
		t.Fatalf("a continued call under a confirm rule: held %v, %v", held, err)
	}
	g, _ = newGuard(t, Config{Rules: []Rule{{Name: "no-terminals", Action: Deny, Operations: []string{"session_terminal"}}}})
	_, err := g.Admit(context.Background(), typing, nil)
	wantErr(t, err, sandbox.ErrDenied, CodeDenied, `"no-terminals"`)

	g, _ = newGuard(t, Config{Budgets: []Budget{{Name: "hourly", Window: time.Hour, Executions: 2}}})
	open := typing
	open.Continued = false
	if _, err := g.Admit(context.Background(), open, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := g.Admit(context.Background(), typing, nil); err != nil {
			t.Fatalf("continued call %d after 1 of 2 executions: %v", i, err)
		}
	}
	if _, err := g.Admit(context.Background(), open, nil); err != nil {
		t.Fatalf("the second execution, after the continued calls: %v", err)
	}
	_, err = g.Admit(context.Background(), typing, nil)
	wantErr(t, err, sandbox.ErrBusy, CodeBudgetExhausted, `"hourly"`)
}
