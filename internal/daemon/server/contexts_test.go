package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
)

// TestContextsOverHTTP: a context keeps its state across calls over the
// API; what a caller may ask for is bounded on both sides, with typed
// problems; another token sees nothing of it; the calls are audited.
func TestContextsOverHTTP(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{tokens: []auth.Token{{Name: "alice", Hash: sha256.Sum256([]byte("alice-secret"))}, {Name: "bob", Hash: sha256.Sum256([]byte("bob-secret"))}}})
	alice := []string{"Authorization", "Bearer alice-secret"}
	bob := []string{"Authorization", "Bearer bob-secret"}
	a := en.do("POST", "/v1/sessions", map[string]any{"limits": map[string]any{"wall": "10s"}}, alice...)
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var sess v1.Session
	json.Unmarshal(a.body, &sess)
	base := "/v1/sessions/" + sess.ID

	if a = en.do("POST", base+"/contexts", map[string]any{"language": "cobol"}, alice...); a.status != 400 || a.problem(t).Code != "language_invalid" {
		t.Fatalf("an unknown language: %d %s", a.status, a.body)
	}
	a = en.do("POST", base+"/contexts", map[string]any{}, alice...)
	if a.status != http.StatusCreated {
		t.Fatalf("a context: %d %s", a.status, a.body)
	}
	var cx v1.Context
	json.Unmarshal(a.body, &cx)
	if cx.Language != "python" || cx.ID == "" {
		t.Fatalf("the context: %+v", cx)
	}
	run := func(body any, hdr ...string) (answer, v1.CodeResult) {
		t.Helper()
		a := en.do("POST", base+"/contexts/"+cx.ID+"/run", body, hdr...)
		var res v1.CodeResult
		json.Unmarshal(a.body, &res)
		return a, res
	}
	run(map[string]any{"code": "import os\ndef f(x):\n    return x * k\nk = 21"}, alice...)
	if a, res := run(map[string]any{"code": "f(2)", "timeout": 5}, alice...); a.status != 200 || !res.OK || string(res.Value) != "42" || res.Repr != "42" || res.Type != "int" {
		t.Fatalf("a call: %d %s", a.status, a.body)
	}
	if a, res := run(map[string]any{"code": "raise KeyError('k')"}, alice...); a.status != 200 || res.OK || res.Error == nil || res.Error.Type != "KeyError" {
		t.Fatalf("a call that raises: %d %s", a.status, a.body)
	}
	// Bounds, both sides: the timeout within the session's wall limit.
	if a, _ := run(map[string]any{"code": "1", "timeout": 11}, alice...); a.status != 400 || a.problem(t).Code != "timeout_invalid" {
		t.Fatalf("a timeout over the wall limit: %d %s", a.status, a.body)
	}
	if a, res := run(map[string]any{"code": "1", "timeout": 10}, alice...); a.status != 200 || !res.OK {
		t.Fatalf("a timeout at the wall limit: %d %s", a.status, a.body)
	}
	if a = en.do("POST", base+"/contexts/nope/run", map[string]any{"code": "1"}, alice...); a.status != 404 || a.problem(t).Code != "context_not_found" {
		t.Fatalf("no such context: %d %s", a.status, a.body)
	}
	// Another token: no session, no context.
	if a, _ := run(map[string]any{"code": "k"}, bob...); a.status != 404 {
		t.Fatalf("another token's call: %d %s", a.status, a.body)
	}
	if a = en.do("GET", base+"/contexts", nil, bob...); a.status != 404 {
		t.Fatalf("another token's list: %d %s", a.status, a.body)
	}
	// Reset: the state is gone, the id stays.
	if a = en.do("POST", base+"/contexts/"+cx.ID+"/reset", nil, alice...); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if a, res := run(map[string]any{"code": "k"}, alice...); a.status != 200 || res.OK || res.Error.Type != "NameError" {
		t.Fatalf("after a reset: %d %s", a.status, a.body)
	}
	// At most 8 live contexts.
	for i := 1; i < 8; i++ {
		if a = en.do("POST", base+"/contexts", map[string]any{}, alice...); a.status != http.StatusCreated {
			t.Fatalf("context %d: %d %s", i+1, a.status, a.body)
		}
	}
	if a = en.do("POST", base+"/contexts", map[string]any{}, alice...); a.status != 429 || a.problem(t).Code != "contexts_exhausted" {
		t.Fatalf("a ninth context: %d %s", a.status, a.body)
	}
	if a = en.do("DELETE", base+"/contexts/"+cx.ID, nil, alice...); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if a = en.do("POST", base+"/contexts", map[string]any{}, alice...); a.status != http.StatusCreated {
		t.Fatalf("a context after a delete: %d %s", a.status, a.body)
	}
	// The calls are in the audit log, with their code.
	recs, _, err := en.audit.Query(context.Background(), audit.Query{Operation: string(v1.OpSessionCode), Limit: audit.MaxLimit})
	if err != nil || len(recs) < 5 {
		t.Fatalf("audit: %d rows, %v", len(recs), err)
	}
}

// TestTerminalsOverHTTP: a terminal's output streams as events and ends
// with its exit; input, resize and readers are bounded.
func TestTerminalsOverHTTP(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{})
	a := en.do("POST", "/v1/sessions", map[string]any{})
	var sess v1.Session
	json.Unmarshal(a.body, &sess)
	base := "/v1/sessions/" + sess.ID
	if a = en.do("POST", base+"/terminals", map[string]any{"command": []string{"cat"}, "rows": 10001}); a.status != 400 || a.problem(t).Code != "size_invalid" {
		t.Fatalf("a terminal too large: %d %s", a.status, a.body)
	}
	a = en.do("POST", base+"/terminals", map[string]any{"command": []string{"cat"}, "rows": 10000, "cols": 1})
	if a.status != http.StatusCreated {
		t.Fatalf("a terminal: %d %s", a.status, a.body)
	}
	var term v1.Terminal
	json.Unmarshal(a.body, &term)
	tb := base + "/terminals/" + term.ID

	req, _ := http.NewRequest("GET", en.http.URL+tb+"/output", nil)
	resp, err := en.http.Client().Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the output stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if a = en.do("GET", tb+"/output", nil); a.status != 429 || a.problem(t).Code != "terminal_read" {
		t.Fatalf("a second reader: %d %s", a.status, a.body)
	}
	for _, sz := range []struct {
		rows, cols int
		want       int
	}{{0, 80, 400}, {24, 10001, 400}, {1, 1, 204}, {10000, 10000, 204}} {
		if a = en.do("POST", tb+"/resize", map[string]int{"rows": sz.rows, "cols": sz.cols}); a.status != sz.want {
			t.Fatalf("resize to %dx%d: %d %s", sz.rows, sz.cols, a.status, a.body)
		}
	}
	if a = en.do("POST", tb+"/input", strings.Repeat("x", v1.MaxTerminalInput+1)); a.status != 413 {
		t.Fatalf("too much input: %d %s", a.status, a.body)
	}
	if a = en.do("POST", tb+"/input", strings.Repeat("y", v1.MaxTerminalInput-1)+"\n"); a.status != 204 {
		t.Fatalf("input at the bound: %d %s", a.status, a.body)
	}
	if a = en.do("POST", tb+"/input", "echo-me\n"); a.status != 204 {
		t.Fatalf("input: %d %s", a.status, a.body)
	}
	got := make(chan string, 1)
	echoed := make(chan struct{}) // the input is on the screen
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		var screen strings.Builder
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				switch event {
				case v1.TerminalEventOutput:
					var o v1.TerminalOutput
					json.Unmarshal([]byte(d), &o)
					had := strings.Contains(screen.String(), "echo-me")
					screen.Write(o.Data)
					if !had && strings.Contains(screen.String(), "echo-me") {
						close(echoed)
					}
				case v1.TerminalEventExit:
					got <- screen.String() + "|exit " + d
					return
				}
			}
		}
		got <- screen.String() + "|no exit"
	}()
	// The program is killed once its output shows the input reached it.
	select {
	case <-echoed:
	case s := <-got:
		t.Fatalf("the stream ended before the input was shown: %.300q", s)
	case <-time.After(20 * time.Second):
		t.Fatal("the input was not shown on the terminal")
	}
	if a = en.do("DELETE", tb, nil); a.status != 204 {
		t.Fatalf("kill: %d %s", a.status, a.body)
	}
	select {
	case s := <-got:
		if !strings.Contains(s, "echo-me") || !strings.Contains(s, `|exit {"exit_code":-1,"signal":"SIGKILL"}`) {
			t.Fatalf("the stream: %.300q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the output stream did not end with the program")
	}
	if a = en.do("POST", tb+"/input", "late\n"); a.status != 400 || a.problem(t).Code != "terminal_ended" {
		t.Fatalf("input to an ended terminal: %d %s", a.status, a.body)
	}
	// At most 4 running terminals.
	for i := range 4 {
		if a = en.do("POST", base+"/terminals", map[string]any{"command": []string{"cat"}}); a.status != http.StatusCreated {
			t.Fatalf("terminal %d: %d %s", i+1, a.status, a.body)
		}
	}
	if a = en.do("POST", base+"/terminals", map[string]any{"command": []string{"cat"}}); a.status != 429 || a.problem(t).Code != "terminals_exhausted" {
		t.Fatalf("a fifth terminal: %d %s", a.status, a.body)
	}
	// An exec runs beside them, through the agent.
	if a = en.do("POST", base+"/exec", map[string]any{"command": []string{"sh", "-c", "echo side-by-side"}}); a.status != 200 || !strings.Contains(string(a.body), "side-by-side") {
		t.Fatalf("an exec beside the terminals: %d %s", a.status, a.body)
	}
}

// TestAgentLost: while a session's agent runs, its execs run through it;
// when the agent dies, its contexts say lost (404 context_lost) until
// reset, which starts a new agent, and execs run without it meanwhile.
func TestAgentLost(t *testing.T) {
	requirePython(t)
	en := newEnv(t, setup{})
	a := en.do("POST", "/v1/sessions", map[string]any{})
	var sess v1.Session
	json.Unmarshal(a.body, &sess)
	base := "/v1/sessions/" + sess.ID
	parent := map[string]any{"command": []string{"sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline | cut -c1-40"}}
	if a = en.do("POST", base+"/exec", parent); a.status != 200 || strings.Contains(string(a.body), "python3") {
		t.Fatalf("an exec before the agent: %d %s", a.status, a.body)
	}
	a = en.do("POST", base+"/contexts", map[string]any{})
	var cx v1.Context
	json.Unmarshal(a.body, &cx)
	if a = en.do("POST", base+"/exec", parent); a.status != 200 || !strings.Contains(string(a.body), "python3 -u -c") {
		t.Fatalf("an exec through the agent: %d %s", a.status, a.body)
	}
	// The agent killed from inside: the exec that did it ends with it.
	a = en.do("POST", base+"/exec", map[string]any{"command": []string{"sh", "-c", "kill -9 $PPID; sleep 5"}})
	if a.status != 503 || a.problem(t).Code != "agent_lost" {
		t.Fatalf("an exec that kills the agent: %d %s", a.status, a.body)
	}
	if a = en.do("POST", base+"/contexts/"+cx.ID+"/run", map[string]any{"code": "1"}); a.status != 404 || a.problem(t).Code != "context_lost" {
		t.Fatalf("a call in a context of a dead agent: %d %s", a.status, a.body)
	}
	var list v1.Contexts
	if a = en.do("GET", base+"/contexts", nil); json.Unmarshal(a.body, &list) != nil || len(list.Contexts) != 1 || list.Contexts[0].Lost == "" {
		t.Fatalf("the contexts of a dead agent: %s", a.body)
	}
	if a = en.do("POST", base+"/exec", parent); a.status != 200 || strings.Contains(string(a.body), "python3") {
		t.Fatalf("an exec after the agent died: %d %s", a.status, a.body)
	}
	if a = en.do("POST", base+"/contexts/"+cx.ID+"/reset", nil); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	var res v1.CodeResult
	if a = en.do("POST", base+"/contexts/"+cx.ID+"/run", map[string]any{"code": "6 * 7"}); json.Unmarshal(a.body, &res) != nil || string(res.Value) != "42" {
		t.Fatalf("a call after the reset: %d %s", a.status, a.body)
	}
}

// TestTerminalInputCountsAgainstTheToken: typing into a terminal and
// resetting a context make the sandbox work: they count against the
// token's rate, as executions do.
func TestTerminalInputCountsAgainstTheToken(t *testing.T) {
	requirePython(t)
	tok := tokenFor("slow", "s", false)
	tok.Rate, tok.Burst = 0.001, 4
	en := newEnv(t, setup{tokens: []auth.Token{tok}})
	c, err := client.New(en.http.URL, client.WithToken("s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.CreateSession(ctx, &v1.SessionRequest{}) // 1
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseSession(ctx, s.ID)
	term, err := c.OpenTerminal(ctx, s.ID, &v1.TerminalRequest{Command: []string{"cat"}}) // 2
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TerminalInput(ctx, s.ID, term.ID, []byte("a\n")); err != nil { // 3
		t.Fatal(err)
	}
	cx, err := c.CreateContext(ctx, s.ID, "python") // 4
	if err != nil {
		t.Fatal(err)
	}
	err = c.TerminalInput(ctx, s.ID, term.ID, []byte("b\n"))
	wantProblem(t, "terminal input past the burst", err, http.StatusTooManyRequests, "rate_limited")
	_, err = c.ResetContext(ctx, s.ID, cx.ID)
	wantProblem(t, "a reset past the burst", err, http.StatusTooManyRequests, "rate_limited")
}
