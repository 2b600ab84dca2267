package server

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	_ "github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/tool"
)

// opsEnv is a server with the plain token "user" (user-secret), the admin
// token "default" (admin-secret), tools, the native backend beside local,
// and the guard c; it records the engine's events.
type opsEnv struct {
	*env
	events *event.Subscription
	seen   []event.Event
}

func newOpsEnv(t *testing.T, c guard.Config) *opsEnv {
	t.Helper()
	g, err := guard.New(c)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := tool.New(tool.Options{RuntimeDir: filepath.Join(t.TempDir(), "rt")})
	if err != nil {
		t.Fatal(err)
	}
	user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")},
		backends: []string{"native"}, options: func(o *Options) { o.Guard, o.Tools = g, tools }})
	releaseHeld(t, g)
	o := &opsEnv{env: en, events: en.srv.opts.Engine.Events().Subscribe("test", 1<<14, nil)}
	t.Cleanup(o.events.Close)
	return o
}

// ran says how many events other than approvals the request rid caused:
// everything published before it is asked (a marker published now comes
// after them all).
func (o *opsEnv) ran(t *testing.T, rid string) int {
	t.Helper()
	marker := "marker-" + strconv.Itoa(len(o.seen))
	o.srv.opts.Engine.Events().Publish(event.Event{Type: "test.marker", RequestID: marker})
	for e := range o.events.C() {
		if e.RequestID == marker {
			break
		}
		o.seen = append(o.seen, e)
	}
	n := 0
	for _, e := range o.seen {
		if e.RequestID == rid && e.Kind != event.KindApproval {
			n++
		}
	}
	return n
}

// pending waits for the one approval waiting, as an admin sees it.
func (o *opsEnv) pending(t *testing.T) v1.Approval {
	t.Helper()
	var list v1.Approvals
	waitUntil(t, "a held call", func() bool {
		a := o.do("GET", "/v1/approvals", nil, "Authorization", asAdmin)
		if a.status != 200 || json.Unmarshal(a.body, &list) != nil {
			t.Fatalf("GET /v1/approvals: %d %s", a.status, a.body)
		}
		return len(list.Approvals) > 0
	})
	if len(list.Approvals) != 1 {
		t.Fatalf("approvals %+v, want one", list.Approvals)
	}
	return list.Approvals[0]
}

// fixture is what a call needs made before it: the user's session and a
// context in it.
type fixture struct{ session, context string }

// opCase is a call of one guard operation by the user token.
type opCase struct {
	name   string
	op     string
	native bool                                         // needs the native backend (tools: their mounts)
	setup  func(t *testing.T, o *opsEnv) fixture        // made by tokens no rule names
	call   func(f fixture) (path string, body any)      // a POST
	status int                                          // its success
	count  func(t *testing.T, o *opsEnv, f fixture) int // what it makes, when it runs nothing (else events count)
}

// userSession makes the user's session; contextToo adds a context an
// admin made in it (admins see every session).
func userSession(contextToo bool) func(*testing.T, *opsEnv) fixture {
	return func(t *testing.T, o *opsEnv) fixture {
		t.Helper()
		var s v1.Session
		a := o.do("POST", "/v1/sessions", map[string]any{}, "Authorization", asUser)
		if a.status != http.StatusCreated || json.Unmarshal(a.body, &s) != nil {
			t.Fatalf("the user's session: %d %s", a.status, a.body)
		}
		f := fixture{session: s.ID}
		if contextToo {
			var c v1.Context
			a = o.do("POST", "/v1/sessions/"+s.ID+"/contexts", map[string]any{}, "Authorization", asAdmin)
			if a.status != http.StatusCreated || json.Unmarshal(a.body, &c) != nil {
				t.Fatalf("a context in it: %d %s", a.status, a.body)
			}
			f.context = c.ID
		}
		return f
	}
}

// toolsFound runs the tools' discovery, so that a call's own events are
// the tool's run only.
func toolsFound(t *testing.T, o *opsEnv) fixture {
	t.Helper()
	if a := o.do("GET", "/v1/tools?backend=native", nil, "Authorization", asUser); a.status != 200 {
		t.Fatalf("GET /v1/tools: %d %s", a.status, a.body)
	}
	return fixture{}
}

// listed counts the entries of a listing the user sees.
func listed[T any](path func(f fixture) string, entries func(*T) int) func(*testing.T, *opsEnv, fixture) int {
	return func(t *testing.T, o *opsEnv, f fixture) int {
		t.Helper()
		var v T
		a := o.do("GET", path(f), nil, "Authorization", asUser)
		if a.status != 200 || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("GET %s: %d %s", path(f), a.status, a.body)
		}
		return entries(&v)
	}
}

var opCases = []opCase{
	{name: "run", op: "run", status: 200,
		call: func(fixture) (string, any) { return "/v1/runs", map[string]any{"command": []string{"echo", "ran"}} }},
	{name: "function", op: "function", status: 200,
		call: func(fixture) (string, any) {
			return "/v1/functions:execute", map[string]any{"code": "def f():\n    return 1\n"}
		}},
	{name: "lint", op: "lint", status: 200,
		call: func(fixture) (string, any) { return "/v1/functions:lint", map[string]any{"code": "x = 1\n"} }},
	{name: "tool", op: "tool", status: 200, native: true, setup: toolsFound,
		call: func(fixture) (string, any) {
			return "/v1/tools/python:run", map[string]any{"args": map[string]any{"code": "6 * 7"}, "backend": "native"}
		}},
	{name: "session", op: "session", status: http.StatusCreated,
		call:  func(fixture) (string, any) { return "/v1/sessions", map[string]any{} },
		count: listed(func(fixture) string { return "/v1/sessions" }, func(s *v1.Sessions) int { return len(s.Sessions) })},
	{name: "session exec", op: "session_exec", status: 200, setup: userSession(false),
		call: func(f fixture) (string, any) {
			return "/v1/sessions/" + f.session + "/exec", map[string]any{"command": []string{"echo", "ran"}}
		}},
	{name: "context create", op: "session_code", status: http.StatusCreated, setup: userSession(false),
		call:  func(f fixture) (string, any) { return "/v1/sessions/" + f.session + "/contexts", map[string]any{} },
		count: listed(func(f fixture) string { return "/v1/sessions/" + f.session + "/contexts" }, func(c *v1.Contexts) int { return len(c.Contexts) })},
	{name: "context run", op: "session_code", status: 200, setup: userSession(true),
		call: func(f fixture) (string, any) {
			return "/v1/sessions/" + f.session + "/contexts/" + f.context + "/run", map[string]any{"code": "6 * 7"}
		}},
	{name: "terminal open", op: "session_terminal", status: http.StatusCreated, setup: userSession(false),
		call: func(f fixture) (string, any) {
			return "/v1/sessions/" + f.session + "/terminals", map[string]any{"command": []string{"cat"}}
		},
		count: listed(func(f fixture) string { return "/v1/sessions/" + f.session + "/terminals" }, func(c *v1.Terminals) int { return len(c.Terminals) })},
}

// TestGuardEveryOperation: for each operation a rule may name (the
// guard's own list, so an operation added later needs a case here), a
// deny rule refuses its calls before anything runs, and a confirm rule
// holds them — nothing runs while held — until an admin approves (then
// it runs) or denies (then nothing runs).
func TestGuardEveryOperation(t *testing.T) {
	requirePython(t)
	for _, op := range guard.Operations() {
		if !slices.ContainsFunc(opCases, func(c opCase) bool { return c.op == op }) {
			t.Errorf("guard operation %s has no case here", op)
		}
	}
	for _, c := range opCases {
		t.Run(c.name, func(t *testing.T) {
			if c.native {
				testutil.RequiresRoot(t, "native")
			}
			effect := func(o *opsEnv, f fixture, rid string) int {
				t.Helper()
				if c.count != nil {
					return c.count(t, o, f)
				}
				return o.ran(t, rid)
			}
			send := func(o *opsEnv, f fixture, rid string) answer {
				path, body := c.call(f)
				return o.do("POST", path, body, "Authorization", asUser, "X-Request-Id", rid)
			}
			prepare := func(o *opsEnv) fixture {
				if c.setup == nil {
					return fixture{}
				}
				return c.setup(t, o)
			}
			rule := func(a guard.Action) guard.Config {
				return guard.Config{Rules: []guard.Rule{{Name: string(a) + "-it", Action: a, Tokens: []string{"user"}, Operations: []string{c.op}}},
					Approvals: guard.Approvals{Timeout: 5 * time.Minute}}
			}

			deny := newOpsEnv(t, rule(guard.Deny))
			f := prepare(deny)
			before := effect(deny, f, "denied")
			a := send(deny, f, "denied")
			if a.status != http.StatusForbidden {
				t.Fatalf("denied: %d %s", a.status, a.body)
			}
			if p := a.problem(t); p.Code != guard.CodeDenied || !strings.Contains(p.Detail, `"deny-it"`) {
				t.Errorf("denied: %+v", p)
			}
			if n := effect(deny, f, "denied"); n != before {
				t.Errorf("a denied call took effect: %d, before %d", n, before)
			}

			confirm := newOpsEnv(t, rule(guard.Confirm))
			f = prepare(confirm)
			for _, approve := range []bool{true, false} {
				rid := "held-" + strconv.FormatBool(approve)
				before := effect(confirm, f, rid)
				done := make(chan answer, 1)
				go func() { done <- send(confirm, f, rid) }()
				ap := confirm.pending(t)
				if ap.Operation != c.op || ap.Token != "user" || ap.Rule != "confirm-it" {
					t.Errorf("held %+v", ap)
				}
				if n := effect(confirm, f, rid); n != before {
					t.Errorf("a held call took effect: %d, before %d", n, before)
				}
				if a := confirm.do("POST", "/v1/approvals/"+ap.ID, map[string]any{"approve": approve}, "Authorization", asAdmin); a.status != http.StatusNoContent {
					t.Fatalf("deciding: %d %s", a.status, a.body)
				}
				a := <-done
				n := effect(confirm, f, rid)
				switch {
				case approve && (a.status != c.status || n == before):
					t.Errorf("approved: %d %.300s; took effect %d times, before %d", a.status, a.body, n, before)
				case !approve && (a.status != http.StatusForbidden || a.problem(t).Code != guard.CodeApprovalDenied || n != before):
					t.Errorf("denied by the admin: %d %.300s; took effect %d times, before %d", a.status, a.body, n, before)
				}
			}
		})
	}
}
