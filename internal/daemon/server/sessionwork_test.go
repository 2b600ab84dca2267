package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/agent"
	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
)

// sessionWithContext makes a session of as's and a Python context in it;
// it returns the session's path and the context's id.
func sessionWithContext(t *testing.T, en *env, as string) (base, ctx string) {
	t.Helper()
	a := en.do("POST", "/v1/sessions", map[string]any{"limits": map[string]any{"wall": "10s"}}, "Authorization", as)
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var sess v1.Session
	json.Unmarshal(a.body, &sess)
	base = "/v1/sessions/" + sess.ID
	if a = en.do("POST", base+"/contexts", map[string]any{}, "Authorization", as); a.status != http.StatusCreated {
		t.Fatalf("a context: %d %s", a.status, a.body)
	}
	var cx v1.Context
	json.Unmarshal(a.body, &cx)
	return base, cx.ID
}

// A context's call spends CPU time like a run: it is charged to the
// token's budget, and the next call over it is refused.
func TestContextCallsAreCharged(t *testing.T) {
	requirePython(t)
	en := guardEnv(t, guard.Config{Budgets: []guard.Budget{
		{Name: "cpu", Tokens: []string{"user"}, Window: time.Hour, CPU: 50 * time.Millisecond},
	}}, auth.Limits{})
	base, cx := sessionWithContext(t, en, asUser)
	spin := map[string]any{"code": "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"}
	if a := en.do("POST", base+"/contexts/"+cx+"/run", spin, "Authorization", asUser); a.status != 200 {
		t.Fatalf("spin: %d %s", a.status, a.body)
	}
	a := en.do("POST", base+"/contexts/"+cx+"/run", map[string]any{"code": "1"}, "Authorization", asUser)
	if a.status != 429 || a.problem(t).Code != guard.CodeBudgetExhausted {
		t.Fatalf("a call after 0.2 s of CPU under a 50 ms budget: %d %s", a.status, a.body)
	}
}

// A terminal's program spends CPU time long after the request that opened
// it: it is charged to the token's budget when it ends, orphans it left
// included, and the next call over the budget is refused.
func TestTerminalCPUIsCharged(t *testing.T) {
	requirePython(t)
	en := guardEnv(t, guard.Config{Budgets: []guard.Budget{
		{Name: "cpu", Tokens: []string{"user"}, Window: time.Hour, CPU: 50 * time.Millisecond},
	}}, auth.Limits{})
	base, cx := sessionWithContext(t, en, asUser)
	// The spinning is a child that leaves the terminal's process group:
	// the program's own CPU time is nothing.
	spin := "import os, time\nif os.fork() == 0:\n    os.setsid()\n    t = time.process_time()\n    while time.process_time() - t < 0.2: pass\n    os._exit(0)\nos.wait()"
	a := en.do("POST", base+"/terminals", map[string]any{"command": []string{"python3", "-c", spin}}, "Authorization", asUser)
	if a.status != http.StatusCreated {
		t.Fatalf("a terminal: %d %s", a.status, a.body)
	}
	var term v1.Terminal
	json.Unmarshal(a.body, &term)
	for deadline := time.Now().Add(20 * time.Second); term.Exit == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal's program did not end: %s", a.body)
		}
		a = en.do("GET", base+"/terminals/"+term.ID, nil, "Authorization", asUser)
		json.Unmarshal(a.body, &term)
	}
	a = en.do("POST", base+"/contexts/"+cx+"/run", map[string]any{"code": "1"}, "Authorization", asUser)
	if a.status != 429 || a.problem(t).Code != guard.CodeBudgetExhausted {
		t.Fatalf("a call after a terminal spent 0.2 s of CPU under a 50 ms budget: %d %s", a.status, a.body)
	}
}

// A session's agent stopped by its own program (finding 2 of issue 33):
// an exec whose request it cannot take answers agent_lost within its
// wall limit and a moment, and gives its run slot back — the next run is
// served at once instead of waiting in the queue and being refused.
func TestStoppedAgentFreesItsSlot(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{maxRuns: 1})
	base, cx := sessionWithContext(t, en, "")
	stop := map[string]any{"code": "import os, signal, threading\nthreading.Timer(0.2, lambda: os.kill(os.getppid(), signal.SIGSTOP)).start()"}
	if a := en.do("POST", base+"/contexts/"+cx+"/run", stop); a.status != 200 {
		t.Fatalf("arming the stop: %d %s", a.status, a.body)
	}
	time.Sleep(time.Second) // the timer fires 0.2 s after the call
	body, _ := json.Marshal(map[string]any{"command": []string{"true"}, "timeout": 2,
		"env": map[string]string{"BIG": strings.Repeat("x", 100_000)}})
	c := en.http.Client()
	c.Timeout = 20 * time.Second // a wedged exec would hold it forever
	start := time.Now()
	resp, err := c.Post(en.http.URL+base+"/exec", "application/json", bytes.NewReader(body))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("an exec on a stopped agent: no answer after %v: %v", took, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{resp.StatusCode, resp.Header, b}
	if a.status != http.StatusServiceUnavailable || a.problem(t).Code != agent.CodeAgentLost {
		t.Fatalf("an exec on a stopped agent: %d %s", a.status, a.body)
	}
	t.Logf("the exec (wall 2 s) held its slot %v", took.Round(time.Millisecond))
	if st := en.srv.opts.Engine.Admission(); st.SlotsInUse != 0 {
		t.Fatalf("after the exec answered, %d run slots are held", st.SlotsInUse)
	}
	if a := en.do("POST", "/v1/runs", map[string]any{"command": []string{"true"}}); a.status != 200 {
		t.Fatalf("a run after the stopped agent's exec: %d %s", a.status, a.body)
	}
}
