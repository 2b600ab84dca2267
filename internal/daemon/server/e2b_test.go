package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/internal/daemon/guard"
)

// The E2B surface's own guarantees, over raw HTTP and a Go Connect
// client; what the SDKs see is tested with the SDKs themselves
// (integration/e2b).

// e2bEnv is a server with the tokens alice and bob (bob an admin-free
// peer), on the local backend.
func e2bEnv(t *testing.T, s setup) *env {
	t.Helper()
	alice, _ := auth.ParseToken("alice:" + auth.HashSecret("alice-secret"))
	bob, _ := auth.ParseToken("bob:" + auth.HashSecret("bob-secret"))
	s.tokens = []auth.Token{alice, bob, auth.FromSecret("admin-secret")}
	return newEnv(t, s)
}

// e2bCreate makes a sandbox as key and answers it.
func e2bCreate(t *testing.T, en *env, key string, body any) e2b.Sandbox {
	t.Helper()
	a := en.do("POST", "/e2b/v2/sandboxes", body, "X-API-Key", key)
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var sb e2b.Sandbox
	if err := json.Unmarshal(a.body, &sb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { en.do("DELETE", "/e2b/sandboxes/"+sb.SandboxID, nil, "X-API-Key", key) })
	return sb
}

// e2bError decodes the control API's error shape and checks its code.
func e2bError(t *testing.T, a answer, status int) string {
	t.Helper()
	var e e2b.Error
	if a.status != status || json.Unmarshal(a.body, &e) != nil || e.Code != status || e.Message == "" || len(e.Message) > 1024 {
		t.Fatalf("answer %d %.300s, want an E2B error %d with a short message", a.status, a.body, status)
	}
	return e.Message
}

// inside calls a unary procedure of a sandbox with an access token.
func inside(en *env, id, token, proc string, body any, port ...string) answer {
	p := e2b.PortEnvd
	if len(port) > 0 {
		p = port[0]
	}
	return en.do("POST", "/e2b"+proc, body, e2b.HeaderSandboxID, id, e2b.HeaderSandboxPort, p, e2b.HeaderAccessToken, token)
}

func TestE2BSandboxOfOneTokenIsInvisibleToAnother(t *testing.T) {
	en := e2bEnv(t, setup{})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{"templateID": "base", "timeout": 60, "metadata": map[string]string{"k": "v"}})
	if sb.EnvdAccessToken == "" || sb.EnvdVersion != e2b.EnvdVersion {
		t.Fatalf("created %+v", sb)
	}
	base := "/e2b/sandboxes/" + sb.SandboxID
	for _, c := range []struct{ method, path string }{
		{"GET", base}, {"DELETE", base}, {"POST", base + "/timeout"}, {"POST", base + "/connect"}, {"POST", "/e2b/v2" + base[len("/e2b"):] + "/connect"},
	} {
		e2bError(t, en.do(c.method, c.path, map[string]any{"timeout": 10}, "X-API-Key", "bob-secret"), http.StatusNotFound)
	}
	if a := en.do("GET", "/v1/sessions/"+sb.SandboxID, nil, "Authorization", "Bearer bob-secret"); a.status != http.StatusNotFound {
		t.Fatalf("bob's REST view of alice's sandbox: %d %s", a.status, a.body)
	}
	list := func(key string) []e2b.ListedSandbox {
		a := en.do("GET", "/e2b/v2/sandboxes?metadata=k%3Dv", nil, "X-API-Key", key)
		var l []e2b.ListedSandbox
		if a.status != http.StatusOK || json.Unmarshal(a.body, &l) != nil {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		return l
	}
	if l := list("bob-secret"); len(l) != 0 {
		t.Fatalf("bob lists %+v", l)
	}
	if l := list("alice-secret"); len(l) != 1 || l[0].SandboxID != sb.SandboxID || l[0].Metadata["k"] != "v" {
		t.Fatalf("alice lists %+v", l)
	}
	// An admin sees it, but is not handed its access token, nor may connect.
	var d e2b.Detail
	if a := en.do("GET", base, nil, "X-API-Key", "admin-secret"); a.status != http.StatusOK || json.Unmarshal(a.body, &d) != nil || d.EnvdAccessToken != "" {
		t.Fatalf("the admin's get: %d %s", a.status, a.body)
	}
	e2bError(t, en.do("POST", base+"/connect", nil, "X-API-Key", "admin-secret"), http.StatusForbidden)
	// A timeout past the longest life is refused, not cut.
	e2bError(t, en.do("POST", base+"/timeout", map[string]any{"timeout": 100 * 24 * 3600}, "X-API-Key", "alice-secret"), http.StatusBadRequest)
	// Still alice's, unharmed.
	if a := en.do("GET", base, nil, "X-API-Key", "alice-secret"); a.status != http.StatusOK {
		t.Fatalf("alice's get: %d %s", a.status, a.body)
	}
	e2bError(t, en.do("GET", "/e2b/v2/sandboxes", nil), http.StatusUnauthorized)
	e2bError(t, en.do("GET", "/e2b/v2/sandboxes", nil, "X-API-Key", "wrong"), http.StatusUnauthorized)
}

func TestE2BInSandboxCallsNeedTheSandboxsAccessToken(t *testing.T) {
	en := e2bEnv(t, setup{})
	alices := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 60})
	bobs := e2bCreate(t, en, "bob-secret", map[string]any{"timeout": 60})
	for _, tok := range []string{"", "0123", bobs.EnvdAccessToken} { // none, a wrong one, bob's
		e2bError(t, inside(en, alices.SandboxID, tok, e2b.ProcessList, map[string]any{}), http.StatusBadGateway)
	}
	e2bError(t, inside(en, "nosuchsandbox", alices.EnvdAccessToken, e2b.ProcessList, map[string]any{}), http.StatusBadGateway)
	if a := inside(en, alices.SandboxID, alices.EnvdAccessToken, e2b.ProcessList, map[string]any{}); a.status != http.StatusOK || !strings.Contains(string(a.body), `"processes":[]`) {
		t.Fatalf("alice's own list: %d %s", a.status, a.body)
	}
	// The code interpreter's context calls carry the token as the traffic token.
	a := en.do("GET", "/e2b/contexts", nil, e2b.HeaderSandboxID, alices.SandboxID, e2b.HeaderSandboxPort, e2b.PortJupyter, e2b.HeaderTrafficToken, alices.TrafficAccessToken)
	if a.status != http.StatusOK {
		t.Fatalf("contexts with the traffic token: %d %s", a.status, a.body)
	}
	e2bError(t, en.do("GET", "/e2b/contexts", nil, e2b.HeaderSandboxID, alices.SandboxID, e2b.HeaderSandboxPort, e2b.PortJupyter), http.StatusBadGateway)
	e2bError(t, inside(en, alices.SandboxID, alices.EnvdAccessToken, e2b.ProcessList, map[string]any{}, "8080"), http.StatusBadGateway)
	// Absolute paths outside the work dir are refused, relative ones stay in it.
	if a := inside(en, alices.SandboxID, alices.EnvdAccessToken, e2b.FilesystemStat, map[string]any{"path": "/etc/passwd"}); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "outside the work dir") {
		t.Fatalf("stat /etc/passwd: %d %s", a.status, a.body)
	}
	if a := inside(en, alices.SandboxID, alices.EnvdAccessToken, e2b.FilesystemStat, map[string]any{"path": "../../etc"}); a.status != http.StatusBadRequest {
		t.Fatalf("stat ../../etc: %d %s", a.status, a.body)
	}
}

func TestE2BRefusesWhatExecboxCannotDo(t *testing.T) {
	en := e2bEnv(t, setup{})
	for field, body := range map[string]map[string]any{
		"templateID":            {"templateID": "my-image"},
		"allow_internet_access": {"allow_internet_access": true},
		"network":               {"network": map[string]any{"allowOut": []string{"example.com"}}},
		"autoPause":             {"autoPause": true},
		"volumeMounts":          {"volumeMounts": []map[string]string{{"name": "v", "path": "/data"}}},
		"timeout":               {"timeout": 0},
		"envVars":               {"envVars": map[string]string{"A=B": "c"}},
	} {
		if msg := e2bError(t, en.do("POST", "/e2b/v2/sandboxes", body, "X-API-Key", "alice-secret"), http.StatusBadRequest); !strings.Contains(msg, field) {
			t.Errorf("%s: message %q does not name it", field, msg)
		}
	}
	if n := len(en.srv.opts.Engine.Sessions(engine.Owner{Privileged: true})); n != 0 {
		t.Fatalf("%d sessions left by refused creates", n)
	}
	// allow_internet_access false is what execbox gives: allowed.
	e2bCreate(t, en, "alice-secret", map[string]any{"allow_internet_access": false})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{})
	if msg := e2bError(t, en.do("POST", "/e2b/sandboxes/"+sb.SandboxID+"/pause", nil, "X-API-Key", "alice-secret"), http.StatusNotImplemented); !strings.Contains(msg, "pause") {
		t.Fatalf("pause: %q", msg)
	}
	e2bError(t, en.do("GET", "/e2b/nothing/here", nil, "X-API-Key", "alice-secret"), http.StatusNotFound)
	// Bounds: a body over e2bMaxBody; a list page over e2bMaxList; both sides.
	e2bError(t, en.do("POST", "/e2b/v2/sandboxes", `{"templateID":"`+strings.Repeat("y", 100<<10)+`"}`, "X-API-Key", "alice-secret"), http.StatusBadRequest)
	big := strings.Repeat("x", int(e2bMaxBody))
	e2bError(t, en.do("POST", "/e2b/v2/sandboxes", `{"templateID":"`+big+`"}`, "X-API-Key", "alice-secret"), http.StatusRequestEntityTooLarge)
	e2bError(t, en.do("GET", "/e2b/v2/sandboxes?limit=101", nil, "X-API-Key", "alice-secret"), http.StatusBadRequest)
	if a := en.do("GET", "/e2b/v2/sandboxes?limit=100", nil, "X-API-Key", "alice-secret"); a.status != http.StatusOK {
		t.Fatalf("limit 100: %d %s", a.status, a.body)
	}
}

func TestE2BTimeoutClosesTheSandbox(t *testing.T) {
	en := e2bEnv(t, setup{})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 1})
	keep := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 1})
	if a := en.do("POST", "/e2b/sandboxes/"+keep.SandboxID+"/timeout", map[string]any{"timeout": 60}, "X-API-Key", "alice-secret"); a.status != http.StatusNoContent {
		t.Fatalf("setTimeout: %d %s", a.status, a.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for en.do("GET", "/v1/sessions/"+sb.SandboxID, nil, "Authorization", "Bearer alice-secret").status != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("the session outlived its sandbox's timeout of 1 s by 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	e2bError(t, en.do("GET", "/e2b/sandboxes/"+sb.SandboxID, nil, "X-API-Key", "alice-secret"), http.StatusNotFound)
	e2bError(t, inside(en, sb.SandboxID, sb.EnvdAccessToken, e2b.ProcessList, map[string]any{}), http.StatusBadGateway)
	if a := en.do("GET", "/e2b/sandboxes/"+keep.SandboxID, nil, "X-API-Key", "alice-secret"); a.status != http.StatusOK {
		t.Fatalf("the sandbox whose timeout was moved: %d %s", a.status, a.body)
	}
}

// e2bClient is a Go Connect client of sandbox sb's procedures.
func e2bStarter(en *env, sb e2b.Sandbox) func(ctx context.Context, cmd ...string) (*connect.ServerStreamForClient[e2b.StreamEvent], error) {
	c := connect.NewClient[e2b.StartRequest, e2b.StreamEvent](en.http.Client(), en.http.URL+"/e2b"+e2b.ProcessStart, connect.WithCodec(e2b.Codec))
	return func(ctx context.Context, cmd ...string) (*connect.ServerStreamForClient[e2b.StreamEvent], error) {
		req := connect.NewRequest(&e2b.StartRequest{Process: e2b.ProcessConfig{Cmd: cmd[0], Args: cmd[1:]}})
		req.Header().Set(e2b.HeaderSandboxID, sb.SandboxID)
		req.Header().Set(e2b.HeaderSandboxPort, e2b.PortEnvd)
		req.Header().Set(e2b.HeaderAccessToken, sb.EnvdAccessToken)
		return c.CallServerStream(ctx, req)
	}
}

// started reads a stream's start event: the process's pid.
func started(t *testing.T, s *connect.ServerStreamForClient[e2b.StreamEvent]) uint32 {
	t.Helper()
	if !s.Receive() || s.Msg().Event.Start == nil {
		t.Fatalf("no start event: %v", s.Err())
	}
	return s.Msg().Event.Start.PID
}

func TestE2BProcessesAreBounded(t *testing.T) {
	en := e2bEnv(t, setup{maxRuns: e2bMaxProcs + 4, ownerRuns: e2bMaxProcs + 4})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 120})
	start := e2bStarter(en, sb)
	ctx := context.Background()
	// e2bMaxProcs run at once; one more is refused, not queued.
	var first uint32
	for i := range e2bMaxProcs {
		s, err := start(ctx, "sleep", "60")
		if err != nil {
			t.Fatal(err)
		}
		pid := started(t, s)
		if i == 0 {
			first = pid
		}
		s.Close() // the process runs on
	}
	if a := inside(en, sb.SandboxID, sb.EnvdAccessToken, e2b.ProcessList, map[string]any{}); strings.Count(string(a.body), `"pid"`) != e2bMaxProcs {
		t.Fatalf("listed: %s", a.body)
	}
	s, err := start(ctx, "sleep", "60")
	if err == nil && !s.Receive() {
		err = s.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("process %d: %v, want resource_exhausted", e2bMaxProcs+1, err)
	}
	// Followers of one process: e2bMaxFollowers, then refused.
	attach := connect.NewClient[e2b.ConnectRequest, e2b.StreamEvent](en.http.Client(), en.http.URL+"/e2b"+e2b.ProcessConnect, connect.WithCodec(e2b.Codec))
	follow := func() (*connect.ServerStreamForClient[e2b.StreamEvent], error) {
		req := connect.NewRequest(&e2b.ConnectRequest{Process: e2b.ProcessSelector{PID: &first}})
		req.Header().Set(e2b.HeaderSandboxID, sb.SandboxID)
		req.Header().Set(e2b.HeaderSandboxPort, e2b.PortEnvd)
		req.Header().Set(e2b.HeaderAccessToken, sb.EnvdAccessToken)
		return attach.CallServerStream(ctx, req)
	}
	var open []*connect.ServerStreamForClient[e2b.StreamEvent]
	for range e2bMaxFollowers {
		s, err := follow()
		if err != nil {
			t.Fatal(err)
		}
		started(t, s)
		open = append(open, s)
	}
	s, err = follow()
	if err == nil && !s.Receive() {
		err = s.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("follower %d: %v, want resource_exhausted", e2bMaxFollowers+1, err)
	}
	// A kill ends the process: its followers see the end.
	if a := inside(en, sb.SandboxID, sb.EnvdAccessToken, e2b.ProcessSendSignal, map[string]any{"process": map[string]any{"pid": first}, "signal": "SIGNAL_SIGKILL"}); a.status != http.StatusOK {
		t.Fatalf("kill: %d %s", a.status, a.body)
	}
	for _, s := range open {
		var end *e2b.EndEvent
		for end == nil && s.Receive() {
			end = s.Msg().Event.End
		}
		if end == nil || end.Exited || end.ExitCode != -1 {
			t.Fatalf("follower's end %+v (%v)", end, s.Err())
		}
		s.Close()
	}
}

func TestE2BSlowFollowerIsDroppedNotWaitedFor(t *testing.T) {
	data := func(n int) e2b.ProcessEvent {
		return e2b.ProcessEvent{Data: &e2b.DataEvent{Stdout: make([]byte, n)}}
	}
	recv := func(f *e2bFollower) (e2b.ProcessEvent, bool) {
		ev, ok := <-f.ch
		return f.next(ev, ok)
	}
	// drain reads a follower's queue to its close: how many events.
	drain := func(f *e2bFollower) (n int) {
		for ev, ok := recv(f); ok; ev, ok = recv(f) {
			if ev.End == nil {
				n++
			}
		}
		return n
	}
	base := e2bQueued.Load()

	// By count: a follower that reads nothing holds e2bFollowerQueue
	// events, then is dropped; one that reads keeps up.
	p := &e2bProc{pid: 1, followers: map[*e2bFollower]bool{}}
	slow, _ := p.follow()
	fast, _ := p.follow()
	for range e2bFollowerQueue + 1 {
		p.publish(data(1))
		recv(fast)
	}
	if n := drain(slow); n != e2bFollowerQueue {
		t.Fatalf("the slow follower got %d events before its end, want %d", n, e2bFollowerQueue)
	}
	p.publish(e2b.ProcessEvent{End: &e2b.EndEvent{}})
	if ev, _ := recv(fast); ev.End == nil {
		t.Fatalf("the fast follower's last event %+v", ev)
	}
	if _, ok := <-fast.ch; ok {
		t.Fatal("the fast follower's queue is open after the end")
	}
	if _, err := p.follow(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("following an ended process: %v", err)
	}

	// By bytes: e2bFollowerBytes wait, one byte more does not.
	p = &e2bProc{pid: 2, followers: map[*e2bFollower]bool{}}
	f, _ := p.follow()
	p.publish(data(e2bFollowerBytes))
	if !p.followers[f] {
		t.Fatal("a follower with exactly e2bFollowerBytes queued was dropped")
	}
	p.publish(data(1))
	if p.followers[f] || drain(f) != 1 {
		t.Fatal("a follower over e2bFollowerBytes was kept")
	}

	// Server-wide: followers of different processes together hold at
	// most e2bQueueBytes.
	var held []*e2bFollower
	for i := 0; int64(len(held))*e2bFollowerBytes < e2bQueueBytes-base; i++ {
		p := &e2bProc{pid: uint32(10 + i), followers: map[*e2bFollower]bool{}}
		f, _ := p.follow()
		p.publish(data(e2bFollowerBytes))
		if !p.followers[f] {
			t.Fatalf("follower %d dropped with %d bytes queued server-wide", i, e2bQueued.Load())
		}
		held = append(held, f)
	}
	p = &e2bProc{pid: 3, followers: map[*e2bFollower]bool{}}
	over, _ := p.follow()
	p.publish(data(1))
	if p.followers[over] {
		t.Fatalf("a follower kept past e2bQueueBytes (%d queued)", e2bQueued.Load())
	}
	for _, f := range held {
		recv(f)
	}
	if q := e2bQueued.Load(); q != base {
		t.Fatalf("%d bytes counted as queued after every queue was read, want %d", q, base)
	}
}

func TestE2BExecutionOutputIsBounded(t *testing.T) {
	base := e2bQueued.Load()
	line := func(n int) e2b.Output { return e2b.Output{Type: e2b.OutputStdout, Text: strings.Repeat("x", n)} }
	q := newE2BLines()
	q.push(line(e2bFollowerBytes))
	if q.lost() || len(q.ch) != 1 {
		t.Fatal("e2bFollowerBytes of output were dropped")
	}
	q.push(line(1))
	if !q.lost() || len(q.ch) != 1 {
		t.Fatal("output past e2bFollowerBytes was kept")
	}
	q.took(<-q.ch)
	q = newE2BLines()
	for range e2bOutputQueue {
		q.push(line(1))
	}
	if q.lost() {
		t.Fatal("e2bOutputQueue lines were not all kept")
	}
	q.push(line(1))
	if !q.lost() {
		t.Fatal("a line past e2bOutputQueue was kept")
	}
	for len(q.ch) > 0 {
		q.took(<-q.ch)
	}
	if e2bQueued.Load() != base {
		t.Fatalf("%d bytes counted as queued after the queues were read, want %d", e2bQueued.Load(), base)
	}
}

func TestE2BProcessesPassTheGuardAndTheAudit(t *testing.T) {
	g, err := guard.New(guard.Config{
		Rules: []guard.Rule{{Name: "no-bob-execs", Action: guard.Deny, Tokens: []string{"bob"},
			Operations: []string{"session_exec"}, Languages: []string{"command"}}},
		Budgets: []guard.Budget{{Name: "two", Tokens: []string{"alice"}, Window: time.Hour, Executions: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	en := e2bEnv(t, setup{options: func(o *Options) { o.Guard = g }})
	alices := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 60}) // the budget's first execution
	bobs := e2bCreate(t, en, "bob-secret", map[string]any{"timeout": 60})
	ctx := context.Background()
	s, err := e2bStarter(en, bobs)(ctx, "true")
	if err == nil && !s.Receive() {
		err = s.Err()
	}
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "no-bob-execs") {
		t.Fatalf("bob's process: %v, want the rule's permission_denied", err)
	}
	start := e2bStarter(en, alices)
	for i := range 3 {
		s, err := start(ctx, "sh", "-c", "echo hi")
		if err == nil && !s.Receive() {
			err = s.Err()
		}
		if i < 2 {
			if err != nil {
				t.Fatalf("alice's process %d: %v", i+1, err)
			}
			for s.Receive() {
			}
			s.Close()
			continue
		}
		var ce *connect.Error
		if !errors.As(err, &ce) || connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "two") {
			t.Fatalf("alice's process over her budget: %v", err)
		}
	}
	rows, _, err := en.audit.Query(ctx, audit.Query{Operation: string(v1.OpSessionExec), Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, r := range rows {
		if r.Session == alices.SandboxID && r.Token == "alice" && r.CodeSHA256 != "" && r.Reason == "exited" {
			ran++
		}
	}
	if ran != 2 {
		t.Fatalf("%d audit rows of alice's processes that ran, want 2: %+v", ran, rows)
	}
}

func TestE2BStdinStreamsToTheProcess(t *testing.T) {
	en := e2bEnv(t, setup{})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 60})
	ctx := context.Background()
	header := func(h http.Header) {
		h.Set(e2b.HeaderSandboxID, sb.SandboxID)
		h.Set(e2b.HeaderSandboxPort, e2b.PortEnvd)
		h.Set(e2b.HeaderAccessToken, sb.EnvdAccessToken)
	}
	starter := connect.NewClient[e2b.StartRequest, e2b.StreamEvent](en.http.Client(), en.http.URL+"/e2b"+e2b.ProcessStart, connect.WithCodec(e2b.Codec))
	yes := true
	req := connect.NewRequest(&e2b.StartRequest{Process: e2b.ProcessConfig{Cmd: "cat"}, Stdin: &yes})
	header(req.Header())
	out, err := starter.CallServerStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	pid := started(t, out)
	in := connect.NewClient[e2b.StreamInputRequest, e2b.Empty](en.http.Client(), en.http.URL+"/e2b"+e2b.ProcessStream, connect.WithCodec(e2b.Codec)).CallClientStream(ctx)
	header(in.RequestHeader())
	first := e2b.StreamInputRequest{}
	first.Start = &struct {
		Process e2b.ProcessSelector `json:"process"`
	}{e2b.ProcessSelector{PID: &pid}}
	if err := in.Send(&first); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"one ", "two\n"} {
		m := e2b.StreamInputRequest{}
		m.Data = &struct {
			Input e2b.ProcessInput `json:"input"`
		}{e2b.ProcessInput{Stdin: []byte(part)}}
		if err := in.Send(&m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if a := inside(en, sb.SandboxID, sb.EnvdAccessToken, e2b.ProcessCloseStdin, map[string]any{"process": map[string]any{"pid": pid}}); a.status != http.StatusOK {
		t.Fatalf("closeStdin: %d %s", a.status, a.body)
	}
	var got strings.Builder
	var end *e2b.EndEvent
	for end == nil && out.Receive() {
		ev := out.Msg().Event
		if ev.Data != nil {
			got.Write(ev.Data.Stdout)
		}
		end = ev.End
	}
	if got.String() != "one two\n" || end == nil || !end.Exited || end.ExitCode != 0 {
		t.Fatalf("cat read %q and ended %+v (%v)", got.String(), end, out.Err())
	}
}

func TestE2BInputToAProcessThatDoesNotReadIsBounded(t *testing.T) {
	// (Through the agent, stdin is queued in the sandbox, within its own
	// bound; the pipe here stands for a process that reads nothing.)
	pr, pw := io.Pipe()
	p := &e2bProc{pid: 1, stdin: pw, followers: map[*e2bFollower]bool{}}
	input := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return p.input(ctx, e2b.ProcessInput{Stdin: []byte("data")})
	}
	if err := input(100 * time.Millisecond); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("input nobody reads: %v, want deadline_exceeded", err)
	}
	if err := input(time.Second); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a second input while the first waits: %v, want resource_exhausted", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "data" {
		t.Fatalf("the waiting input: %q %v", buf, err)
	}
	go io.Copy(io.Discard, pr)
	for !p.writing.TryLock() { // the first write's goroutine lets go
		time.Sleep(time.Millisecond)
	}
	p.writing.Unlock()
	if err := input(5 * time.Second); err != nil {
		t.Fatalf("input once the first was read: %v", err)
	}
	pw.Close()
}

func TestE2BWatchesAreBounded(t *testing.T) {
	en := e2bEnv(t, setup{})
	ctx := context.Background()
	watch := connect.NewClient[e2b.WatchDirRequest, e2b.WatchDirResponse](en.http.Client(), en.http.URL+"/e2b"+e2b.FilesystemWatch, connect.WithCodec(e2b.Codec))
	open := func(sb e2b.Sandbox) (*connect.ServerStreamForClient[e2b.WatchDirResponse], error) {
		r := connect.NewRequest(&e2b.WatchDirRequest{Path: "/work"})
		r.Header().Set(e2b.HeaderSandboxID, sb.SandboxID)
		r.Header().Set(e2b.HeaderSandboxPort, e2b.PortEnvd)
		r.Header().Set(e2b.HeaderAccessToken, sb.EnvdAccessToken)
		s, err := watch.CallServerStream(ctx, r)
		if err == nil && !s.Receive() {
			err = s.Err()
		}
		return s, err
	}
	// e2bMaxWatches per sandbox, then refused; e2bMaxWatchesAll on the
	// server, then refused until one ends.
	var last *connect.ServerStreamForClient[e2b.WatchDirResponse]
	for n := 0; n < e2bMaxWatchesAll; {
		sb := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 60})
		for range e2bMaxWatches {
			s, err := open(sb)
			if err != nil {
				t.Fatalf("watch %d: %v", n+1, err)
			}
			defer s.Close()
			last, n = s, n+1
		}
		if _, err := open(sb); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "the sandbox") {
			t.Fatalf("watch %d of one sandbox: %v, want resource_exhausted", e2bMaxWatches+1, err)
		}
	}
	bobs := e2bCreate(t, en, "bob-secret", map[string]any{"timeout": 60})
	if _, err := open(bobs); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "the server") {
		t.Fatalf("watch %d of the server: %v, want resource_exhausted", e2bMaxWatchesAll+1, err)
	}
	last.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := open(bobs)
		if err == nil {
			s.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watch after one ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2BSlowBodiesAreCut(t *testing.T) {
	en := e2bEnv(t, setup{options: func(o *Options) { o.BodyTimeout = time.Second }})
	sb := e2bCreate(t, en, "alice-secret", map[string]any{"timeout": 60})
	call := func(every time.Duration) (int, time.Duration) {
		pr, pw := io.Pipe()
		wrote := make(chan struct{})
		defer func() { pr.Close(); <-wrote }()
		go func() {
			defer close(wrote)
			defer pw.Close()
			for _, b := range []byte(`{"path":"/work"}`) {
				time.Sleep(every)
				if _, err := pw.Write([]byte{b}); err != nil {
					return
				}
			}
		}()
		req, _ := http.NewRequest("POST", en.http.URL+"/e2b"+e2b.FilesystemStat, pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(e2b.HeaderSandboxID, sb.SandboxID)
		req.Header.Set(e2b.HeaderSandboxPort, e2b.PortEnvd)
		req.Header.Set(e2b.HeaderAccessToken, sb.EnvdAccessToken)
		start := time.Now()
		resp, err := en.http.Client().Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	// 16 bytes in ~0.3 s: in time. 16 bytes at one every 0.5 s: cut near
	// the one-second window, long before the 8 s it would take.
	if status, _ := call(20 * time.Millisecond); status != http.StatusOK {
		t.Fatalf("a body in time: %d", status)
	}
	if status, took := call(500 * time.Millisecond); status == http.StatusOK || took > 4*time.Second {
		t.Fatalf("a body at 2 bytes/s: %d after %s, want cut within a few seconds", status, took)
	}
}
