package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/daemon/wire"
)

// releaseHeld denies, when the test ends, the calls g still holds: a test
// that failed while one was held does not wait for its timeout. Call it
// after newEnv, so that it runs before the server closes.
func releaseHeld(t *testing.T, g *guard.Guard) {
	t.Cleanup(func() {
		for _, p := range g.Pending() {
			g.Decide(p.ID, false, "", "the test ended")
		}
	})
}

// Held calls share their places as runs share slots: a plain token's
// within its share and outside the admin's place, an admin's anywhere;
// and an admin may not approve its own call unless self_approve.
func TestApprovalSharesAndSelfApproval(t *testing.T) {
	u := func(name string) auth.Token {
		tok, _ := auth.ParseToken(name + ":" + auth.HashSecret(name+"-secret"))
		return tok
	}
	g, err := guard.New(guard.Config{Rules: []guard.Rule{{Name: "ask", Action: guard.Confirm}},
		Approvals: guard.Approvals{Timeout: 5 * time.Minute, MaxPending: 3, MaxPendingPerToken: 1, AdminPending: 1}})
	if err != nil {
		t.Fatal(err)
	}
	en := newEnv(t, setup{tokens: []auth.Token{u("u1"), u("u2"), u("u3"), auth.FromSecret("admin-secret"), tokenFor("approver", "approver-secret", true)},
		options: func(o *Options) { o.Guard = g }})
	releaseHeld(t, g)
	run := func(as string) <-chan answer {
		done := make(chan answer, 1)
		go func() { done <- en.do("POST", "/v1/runs", `{"command":["echo","ran"]}`, "Authorization", as) }()
		return done
	}
	held := func(n int) {
		t.Helper()
		waitUntil(t, strconv.Itoa(n)+" held calls", func() bool { return len(g.Pending()) == n })
	}
	refused := func(as, why string) {
		t.Helper()
		before := len(g.Pending())
		done := run(as)
		var a answer
		for a.status == 0 {
			select {
			case a = <-done:
			case <-time.After(10 * time.Millisecond):
				if p := g.Pending(); len(p) > before { // held, not refused: not waited for
					g.Decide(p[len(p)-1].ID, false, "approver", "held, not refused")
				}
			}
		}
		if a.status != http.StatusTooManyRequests || a.problem(t).Code != guard.CodeApprovalsFull || !strings.Contains(a.problem(t).Detail, why) ||
			a.header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %s, want 429 approvals_full naming %s", as, a.status, a.body, why)
		}
	}
	u1 := run("Bearer u1-secret")
	held(1) // u1 at its share
	refused("Bearer u1-secret", "max_pending_per_token")
	u2 := run("Bearer u2-secret")
	held(2) // the last place a plain token may take
	refused("Bearer u3-secret", "admin_pending")
	admin := run(asAdmin)
	held(3) // an admin's call takes the kept place
	refused("Bearer approver-secret", "max_pending")

	var mine v1.Approval
	for _, a := range g.Pending() {
		if a.Call.Token == "default" {
			mine = wire.Approval(a)
		}
	}
	a := en.do("POST", "/v1/approvals/"+mine.ID, `{"approve":true}`, "Authorization", asAdmin)
	if a.status != http.StatusForbidden || a.problem(t).Code != guard.CodeSelfApproval {
		t.Fatalf("an admin approves its own call: %d %s", a.status, a.body)
	}
	held(3) // still waiting for another
	if a := en.do("POST", "/v1/approvals/"+mine.ID, `{"approve":true}`, "Authorization", "Bearer approver-secret"); a.status != http.StatusNoContent {
		t.Fatalf("another admin approves it: %d %s", a.status, a.body)
	}
	if a := <-admin; a.status != 200 || !strings.Contains(string(a.body), `"stdout":"ran\n"`) {
		t.Errorf("the admin's approved run: %d %s", a.status, a.body)
	}
	for _, p := range g.Pending() {
		if err := g.Decide(p.ID, false, "approver", ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, done := range []<-chan answer{u1, u2} {
		if a := <-done; a.status != http.StatusForbidden {
			t.Errorf("a denied run: %d %s", a.status, a.body)
		}
	}

	// With self_approve, an admin approves its own.
	g, err = guard.New(guard.Config{Rules: []guard.Rule{{Name: "ask", Action: guard.Confirm}}, Approvals: guard.Approvals{SelfApprove: true}})
	if err != nil {
		t.Fatal(err)
	}
	en = newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("admin-secret")}, options: func(o *Options) { o.Guard = g }})
	releaseHeld(t, g)
	admin = run(asAdmin)
	held(1)
	if a := en.do("POST", "/v1/approvals/"+g.Pending()[0].ID, `{"approve":true}`, "Authorization", asAdmin); a.status != http.StatusNoContent {
		t.Fatalf("self_approve: %d %s", a.status, a.body)
	}
	if a := <-admin; a.status != 200 {
		t.Errorf("the self-approved run: %d %s", a.status, a.body)
	}
}
