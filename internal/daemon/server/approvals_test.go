package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
)

// guardEnv is a server with the tokens user and admin and the guard c.
func guardEnv(t *testing.T, c guard.Config, limits auth.Limits) *env {
	t.Helper()
	user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
	g, err := guard.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")}, limits: limits, options: func(o *Options) { o.Guard = g }})
}

const (
	asUser  = "Bearer user-secret"
	asAdmin = "Bearer admin-secret"
)

// Rules decide before anything runs: the first that matches, by token,
// operation, language and the backend the engine would select; a denial
// names its rule.
func TestGuardRules(t *testing.T) {
	en := guardEnv(t, guard.Config{Rules: []guard.Rule{
		{Name: "no-js", Action: guard.Deny, Languages: []string{"javascript"}},
		{Name: "user-not-local", Action: guard.Deny, Tokens: []string{"user"}, Backends: []string{"local"}},
		{Name: "no-lint", Action: guard.Deny, Operations: []string{"lint"}},
		{Name: "the-rest", Action: guard.Allow},
	}}, auth.Limits{})
	before := en.auditCount()
	for _, tc := range []struct {
		path, body, as, rule string
	}{
		{"/v1/runs", `{"code":"console.log(1)","language":"javascript"}`, asAdmin, "no-js"},
		{"/v1/runs", `{"command":["true"]}`, asUser, "user-not-local"},
		{"/v1/functions:execute", `{"code":"def f(): return 1"}`, asUser, "user-not-local"},
		{"/v1/sessions", `{}`, asUser, "user-not-local"},
		{"/v1/functions:lint", `{"code":"x = 1"}`, asAdmin, "no-lint"},
	} {
		a := en.do("POST", tc.path, tc.body, "Authorization", tc.as)
		if a.status != http.StatusForbidden {
			t.Errorf("%s %s: %d %s, want 403", tc.path, tc.body, a.status, a.body)
			continue
		}
		if p := a.problem(t); p.Code != guard.CodeDenied || !strings.Contains(p.Detail, strconv.Quote(tc.rule)) {
			t.Errorf("%s %s: %+v, want guard_denied naming %s", tc.path, tc.body, p, tc.rule)
		}
	}
	if a := en.do("POST", "/v1/runs", `{"command":["echo","ok"]}`, "Authorization", asAdmin); a.status != 200 || !strings.Contains(string(a.body), `"stdout":"ok\n"`) {
		t.Errorf("a run no rule denies: %d %s", a.status, a.body)
	}
	// Its log line names the rule that let it through.
	if !strings.Contains(en.logs.String(), `"guard_rule":"the-rest"`) {
		t.Errorf("no request logged with guard_rule the-rest:\n%s", en.logs.String())
	}
	// Every refusal is audited with its code; only the allowed run ran.
	rows, _, err := en.audit.Query(context.Background(), auditRuns())
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, r := range rows {
		if r.ErrorCode == guard.CodeDenied {
			denied++
		}
	}
	if denied != 2 || en.auditCount()-before != 6 {
		t.Errorf("%d run rows denied, %d rows in all; want 2 and 6", denied, en.auditCount()-before)
	}
}

// A confirm rule holds the call until an admin approves or denies it over
// HTTP, or it expires; each ending is the caller's answer, and the held
// call is published as events.
func TestConfirmFlow(t *testing.T) {
	en := guardEnv(t, guard.Config{
		Rules:     []guard.Rule{{Name: "ask", Action: guard.Confirm, Tokens: []string{"user"}}},
		Approvals: guard.Approvals{Timeout: 3 * time.Second},
	}, auth.Limits{})
	events := en.srv.opts.Engine.Events().Subscribe("test", 64, nil)
	defer events.Close()

	run := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			ch <- en.do("POST", "/v1/runs", `{"command":["echo","held"]}`, "Authorization", asUser, "X-Execbox-Tool-Call-Id", "call-7")
		}()
		return ch
	}
	pending := func() v1.Approval {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			a := en.do("GET", "/v1/approvals", nil, "Authorization", asAdmin)
			var list v1.Approvals
			if err := json.Unmarshal(a.body, &list); a.status != 200 || err != nil {
				t.Fatalf("GET /v1/approvals: %d %s", a.status, a.body)
			}
			if len(list.Approvals) == 1 {
				return list.Approvals[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no approval pending")
		return v1.Approval{}
	}

	// Approved: the run goes on and answers.
	done := run()
	ap := pending()
	if ap.Rule != "ask" || ap.Token != "user" || ap.Operation != "run" || ap.Backend != "" || ap.ToolCallID != "call-7" || len(ap.ID) != 32 ||
		!ap.Expires.After(ap.Created) {
		t.Errorf("approval %+v", ap)
	}
	// The caller cannot see or decide approvals, its own included.
	if a := en.do("GET", "/v1/approvals", nil, "Authorization", asUser); a.status != 403 {
		t.Errorf("a user lists approvals: %d", a.status)
	}
	if a := en.do("POST", "/v1/approvals/"+ap.ID, `{"approve":true}`, "Authorization", asUser); a.status != 403 {
		t.Errorf("a user approves: %d", a.status)
	}
	if a := en.do("POST", "/v1/approvals/"+ap.ID, `{}`, "Authorization", asAdmin); a.status != 400 {
		t.Errorf("a decision without approve: %d %s", a.status, a.body)
	}
	if a := en.do("POST", "/v1/approvals/"+ap.ID, `{"approve":true}`, "Authorization", asAdmin); a.status != 204 {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	if a := <-done; a.status != 200 || !strings.Contains(string(a.body), `"stdout":"held\n"`) {
		t.Errorf("the approved run: %d %s", a.status, a.body)
	}
	if a := en.do("POST", "/v1/approvals/"+ap.ID, `{"approve":false}`, "Authorization", asAdmin); a.status != 404 || a.problem(t).Code != guard.CodeApprovalNotFound {
		t.Errorf("deciding twice: %d %s", a.status, a.body)
	}

	// Denied: the caller gets the operator's reason.
	done = run()
	ap = pending()
	if a := en.do("POST", "/v1/approvals/"+ap.ID, `{"approve":false,"reason":"not now"}`, "Authorization", asAdmin); a.status != 204 {
		t.Fatalf("deny: %d %s", a.status, a.body)
	}
	if a := <-done; a.status != 403 || a.problem(t).Code != guard.CodeApprovalDenied || !strings.Contains(a.problem(t).Detail, "not now") {
		t.Errorf("the denied run: %d %s", a.status, a.body)
	}

	// Expired: no decision within the timeout.
	start := time.Now()
	if a := <-run(); a.status != 403 || a.problem(t).Code != guard.CodeApprovalExpired {
		t.Errorf("the expired run: %d %s", a.status, a.body)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("expired after %v, before its 3s timeout", took)
	}

	// A call that cannot run is refused before it is held.
	if a := en.do("POST", "/v1/runs", `{"command":["true"],"limits":{"memory":1125899906842624}}`, "Authorization", asUser); a.status != 400 || a.problem(t).Field != "limits.memory" && a.problem(t).Field != "limits" {
		t.Errorf("limits over the maxima: %d %s", a.status, a.body)
	}
	if p := en.srv.opts.Guard.Pending(); len(p) != 0 {
		t.Errorf("held: %+v", p)
	}

	// An admin's call matches no rule and is not held.
	if a := en.do("POST", "/v1/runs", `{"command":["true"]}`, "Authorization", asAdmin); a.status != 200 {
		t.Errorf("the admin's run: %d %s", a.status, a.body)
	}

	var got []string
	for len(got) < 6 {
		select {
		case e := <-events.C():
			if e.Kind == event.KindApproval {
				if e.Rule != "ask" || e.Approval == "" || e.ToolCallID != "call-7" || e.Owner != "user" {
					t.Errorf("event %+v", e)
				}
				got = append(got, e.Type+":"+e.Reason)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("approval events so far: %v", got)
		}
	}
	want := []string{"approval.requested:", "approval.decided:approved", "approval.requested:", "approval.decided:approval_denied",
		"approval.requested:", "approval.decided:approval_expired"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("approval events %v, want %v", got, want)
	}
}

// A held call whose caller leaves is withdrawn at once: nothing is left
// pending, and its end is published as canceled.
func TestConfirmCallerLeaves(t *testing.T) {
	en := guardEnv(t, guard.Config{Rules: []guard.Rule{{Name: "ask", Action: guard.Confirm}}}, auth.Limits{})
	events := en.srv.opts.Engine.Events().Subscribe("test", 64, nil)
	defer events.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", en.http.URL+"/v1/runs", strings.NewReader(`{"command":["true"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", asUser)
	errc := make(chan error, 1)
	go func() {
		resp, err := en.http.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if e := <-events.C(); e.Type != event.ApprovalRequested {
		t.Fatalf("first event %+v", e)
	}
	cancel()
	<-errc
	select {
	case e := <-events.C():
		if e.Type != event.ApprovalDecided || e.Reason != "canceled" {
			t.Errorf("event %+v, want approval.decided canceled", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no approval.decided after the caller left")
	}
	if p := en.srv.opts.Guard.Pending(); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
}

// Budgets and the token's rate are per token, each refusal typed: 429
// budget_exhausted with Retry-After until the window ends, 429
// rate_limited.
func TestBudgetsAndRate(t *testing.T) {
	en := guardEnv(t, guard.Config{Budgets: []guard.Budget{
		{Name: "runs", Tokens: []string{"user"}, Window: time.Hour, Executions: 2},
		{Name: "cpu", Tokens: []string{"default"}, Window: time.Hour, CPU: 20 * time.Millisecond},
	}}, auth.Limits{})
	for i := range 3 {
		a := en.do("POST", "/v1/runs", `{"command":["true"]}`, "Authorization", asUser)
		switch {
		case i < 2 && a.status != 200:
			t.Fatalf("run %d: %d %s", i, a.status, a.body)
		case i == 2:
			p := a.problem(t)
			ra, _ := strconv.Atoi(a.header.Get("Retry-After"))
			if a.status != 429 || p.Code != guard.CodeBudgetExhausted || !strings.Contains(p.Detail, `"runs"`) || ra < 3500 || ra > 3600 {
				t.Errorf("run over the budget: %d %s, Retry-After %q", a.status, a.body, a.header.Get("Retry-After"))
			}
		}
	}
	// The admin's budget is CPU time: a run that spins passes it, the
	// next call is refused.
	spin := `{"code":"import time\nt = time.process_time()\nwhile time.process_time() - t < 0.1: pass"}`
	if a := en.do("POST", "/v1/runs", spin, "Authorization", asAdmin); a.status != 200 {
		t.Fatalf("spin: %d %s", a.status, a.body)
	}
	if a := en.do("POST", "/v1/functions:execute", `{"code":"def f(): return 1"}`, "Authorization", asAdmin); a.status != 429 || a.problem(t).Code != guard.CodeBudgetExhausted {
		t.Errorf("a call over the CPU budget: %d %s", a.status, a.body)
	}

	// The token's rate (internal/daemon/auth), beside the guard.
	rl := guardEnv(t, guard.Config{}, auth.Limits{Rate: 0.01, Burst: 1})
	if a := rl.do("POST", "/v1/runs", `{"command":["true"]}`, "Authorization", asUser); a.status != 200 {
		t.Fatalf("first run: %d %s", a.status, a.body)
	}
	if a := rl.do("POST", "/v1/runs", `{"command":["true"]}`, "Authorization", asUser); a.status != 429 || a.problem(t).Code != v1.CodeRateLimited || a.header.Get("Retry-After") == "" {
		t.Errorf("over the rate: %d %s", a.status, a.body)
	}
}
