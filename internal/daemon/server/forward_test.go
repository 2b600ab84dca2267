package server

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/replica"
)

// TestSessionsAcrossReplicas: two replicas, each with its own engine,
// find each other by name. A session made on a is served through b —
// execs, a streamed exec, files up and down, a terminal's output stream,
// the close — while b's engine never holds it; another token's request is
// 404 as on a; a bad token is refused by b and never reaches a; a request
// b passed on is not passed again; a session of a replica that is gone is
// 404, of one that does not answer 503.
func TestSessionsAcrossReplicas(t *testing.T) {
	peers := replica.Static{}
	tokens := []auth.Token{tokenFor("alice", "a", false), tokenFor("bob", "b", false)}
	replicaEnv := func(name string) *env {
		en := newEnv(t, setup{tokens: tokens, replica: name, options: func(o *Options) {
			o.Replica, o.Peers, o.WriteTimeout = name, peers, time.Second
		}})
		t.Cleanup(en.srv.peerTransport.CloseIdleConnections)
		return en
	}
	a, b := replicaEnv("a"), replicaEnv("b")
	peers["a"], peers["b"] = a.http.URL, b.http.URL
	ctx := context.Background()
	connect := func(en *env, secret string) *client.Client {
		c, err := client.New(en.http.URL, client.WithToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	onA, onB := connect(a, "a"), connect(b, "a")

	s, err := onA.CreateSession(ctx, &v1.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.ID, "a.") {
		t.Fatalf("session id %q does not name replica a", s.ID)
	}
	if res, err := onB.Exec(ctx, s.ID, &v1.SessionExec{Command: []string{"sh", "-c", "echo hi > f; echo ok"}}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("exec through b: %+v, %v", res, err)
	}
	// A stream longer than the write timeout (1 s): each piece gets it.
	var out bytes.Buffer
	if res, err := onB.ExecStream(ctx, s.ID, &v1.SessionExec{Command: []string{"sh", "-c", "for i in 1 2 3 4 5; do cat f; sleep 0.5; done"}}, &out, &out); err != nil || res.ExitCode != 0 || out.String() != strings.Repeat("hi\n", 5) {
		t.Fatalf("streamed exec through b: %q, %+v, %v", out.String(), res, err)
	}
	if _, err := onB.PutFile(ctx, s.ID, "up.txt", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := onA.ReadFile(ctx, s.ID, "up.txt", 100); err != nil || string(got) != "data" {
		t.Fatalf("a reads what went up through b: %q, %v", got, err)
	}
	term, err := onB.OpenTerminal(ctx, s.ID, &v1.TerminalRequest{Command: []string{"sh", "-c", "cat up.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if exit, err := onB.TerminalOutput(ctx, s.ID, term.ID, &out); err != nil || exit == nil || !strings.Contains(out.String(), "data") {
		t.Fatalf("terminal output through b: %q, %+v, %v", out.String(), exit, err)
	}
	if n := len(b.srv.opts.Engine.Sessions(engine.Owner{Privileged: true})); n != 0 {
		t.Fatalf("b's engine holds %d sessions", n)
	}

	_, err = connect(b, "b").Session(ctx, s.ID)
	wantProblem(t, "bob through b", err, http.StatusNotFound, "session_not_found")
	if ans := b.do("GET", "/v1/sessions/"+s.ID, nil, "Authorization", "Bearer nope"); ans.status != http.StatusUnauthorized {
		t.Fatalf("a bad token through b: %d %s", ans.status, ans.body)
	}
	for en, want := range map[*env]int{a: 0, b: 1} {
		if rows, _, err := en.audit.Query(ctx, audit.Query{Operation: audit.OpAuth}); err != nil || len(rows) != want {
			t.Fatalf("failed authentications audited: %d, %v; want %d", len(rows), err, want)
		}
	}
	if ans := b.do("GET", "/v1/sessions/"+s.ID, nil, "Authorization", "Bearer a", HeaderForwardedBy, "c"); ans.status != http.StatusNotFound {
		t.Fatalf("a request already passed on: %d %s, want b's own 404", ans.status, ans.body)
	}
	_, err = onB.Session(ctx, "c.0123456789abcdef")
	wantProblem(t, "a session of a replica that is gone", err, http.StatusNotFound, "session_not_found")
	if !strings.Contains(err.Error(), "replica c") {
		t.Fatalf("%v does not say which replica is gone", err)
	}

	if err := onB.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = onA.Session(ctx, s.ID)
	wantProblem(t, "the session closed through b", err, http.StatusNotFound, "session_closed")

	s2, err := onA.CreateSession(ctx, &v1.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a.http.Close()
	_, err = onB.Exec(ctx, s2.ID, &v1.SessionExec{Command: []string{"true"}})
	wantProblem(t, "a replica that does not answer", err, http.StatusServiceUnavailable, "replica_unreachable")
}
