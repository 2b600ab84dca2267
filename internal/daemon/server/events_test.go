package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/auth"
)

// sse opens GET /v1/events?query as token and returns its events as they
// come; the stream ends at cleanup.
func (en *env) sse(t *testing.T, token, query string) <-chan v1.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", en.http.URL+"/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /v1/events?%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan v1.Event, 64)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), ":") { // the opening comment: subscribed
		t.Fatalf("the stream did not open with a comment: %q", sc.Text())
	}
	go func() {
		defer close(done)
		defer close(out)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var e v1.Event
				if err := json.Unmarshal([]byte(v), &e); err != nil || e.Type != typ {
					t.Errorf("an event %s (%v) under event: %s", v, err, typ)
				}
				select {
				case out <- e:
				case <-ctx.Done(): // the test stopped reading
					return
				}
			}
		}
	}()
	return out
}

func next(t *testing.T, c <-chan v1.Event) v1.Event {
	t.Helper()
	select {
	case e := <-c:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return v1.Event{}
}

// A token sees its own events only, an admin token everyone's; the
// caller's headers are carried and filter; bad headers and parameters are
// refused; streams are bounded.
func TestEventStreams(t *testing.T) {
	user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")}, options: func(o *Options) { o.MaxEventStreams = 3 }})
	mine := en.sse(t, "user-secret", "")
	byRun := en.sse(t, "admin-secret", "run_id=r1&type=execution.completed")
	all := en.sse(t, "admin-secret", "type=execution.")

	run := `{"command":["sh","-c","exit 2"]}`
	if a := en.do("POST", "/v1/runs", run, "Authorization", "Bearer admin-secret", "X-Execbox-Run-Id", "r1", "X-Execbox-Tool-Call-Id", "t9"); a.status != 200 {
		t.Fatalf("run: %d %s", a.status, a.body)
	}
	if a := en.do("POST", "/v1/runs", run, "Authorization", "Bearer user-secret", "X-Execbox-Run-Id", "r2"); a.status != 200 {
		t.Fatalf("run: %d %s", a.status, a.body)
	}
	e := next(t, byRun)
	if e.Type != event.Completed || e.RunID != "r1" || e.ToolCallID != "t9" || e.Owner != "default" || *e.ExitCode != 2 || e.Kind != event.KindRun {
		t.Errorf("run_id=r1: %+v", e)
	}
	for _, want := range []string{"r1", "r1", "r2", "r2"} {
		if e := next(t, all); e.RunID != want {
			t.Errorf("the admin's stream: %+v, want run %s", e, want)
		}
	}
	for _, want := range []string{event.Started, event.Completed} {
		if e := next(t, mine); e.Type != want || e.RunID != "r2" || e.Owner != "user" {
			t.Errorf("the user's stream: %+v, want its own %s", e, want)
		}
	}

	// A session's events: created, then closed, with its id.
	a := en.do("POST", "/v1/sessions", `{}`, "Authorization", "Bearer user-secret")
	var sess v1.Session
	if a.status != 201 || json.Unmarshal(a.body, &sess) != nil {
		t.Fatalf("session: %d %s", a.status, a.body)
	}
	en.do("DELETE", "/v1/sessions/"+sess.ID, nil, "Authorization", "Bearer user-secret")
	for _, want := range []string{event.SessionCreated, event.SessionClosed} {
		if e := next(t, mine); e.Type != want || e.Session != sess.ID || e.Kind != event.KindSession || e.Owner != "user" {
			t.Errorf("the user's stream: %+v, want %s of session %s", e, want, sess.ID)
		}
	}

	// Bounds and refusals.
	if a := en.do("GET", "/v1/events", nil, "Authorization", "Bearer user-secret"); a.status != 429 || a.problem(t).Code != v1.CodeBusy {
		t.Errorf("a 4th stream of 3: %d %s", a.status, a.body)
	}
	for _, q := range []string{"nope=1", "run_id=a&run_id=b", "run_id=%0a"} {
		if a := en.do("GET", "/v1/events?"+q, nil, "Authorization", "Bearer user-secret"); a.status != 400 {
			t.Errorf("?%s: %d %s", q, a.status, a.body)
		}
	}
	if a := en.do("POST", "/v1/runs", run, "Authorization", "Bearer user-secret", "X-Execbox-Node-Name", strings.Repeat("n", event.MaxCallerLen+1)); a.status != 400 || a.problem(t).Code != v1.CodeInvalidRequest {
		t.Errorf("a node name too long: %d %s", a.status, a.body)
	}
}

// A stream that is not read loses events, never holds a run, and is told
// how many it lost.
func TestEventStreamDrops(t *testing.T) {
	en := newEnv(t, setup{options: func(o *Options) { o.EventBuffer = 1 }})
	stuck := en.sse(t, "", "")
	bus := en.srv.opts.Engine.Events()
	for i := range 2000 {
		bus.Publish(event.Event{Type: event.Started, Caller: event.Caller{RunID: string(rune('a' + i%26))}})
	}
	if a := en.do("POST", "/v1/runs", `{"command":["true"]}`); a.status != 200 {
		t.Fatalf("a run with a stuck stream: %d %s", a.status, a.body)
	}
	dropped := false
	for e := range stuck {
		if e.Type == event.Dropped && e.Dropped > 0 {
			dropped = true
			break
		}
	}
	if !dropped {
		t.Error("no events.dropped notice on a stream that could not keep up")
	}
}
