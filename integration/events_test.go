package integration

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/internal/daemon/webhook"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// watch streams the server's events matching f until the returned stop
// is called, which returns them; the stream is open when watch returns.
func watch(t *testing.T, s *server, c *client.Client, f v1.EventFilter) (stop func() []v1.Event) {
	t.Helper()
	open := s.metric("execbox_event_streams")
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []v1.Event
	done := make(chan error, 1)
	go func() {
		done <- c.Events(ctx, f, func(e v1.Event) error {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
			return nil
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); s.metric("execbox_event_streams") <= open; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the event stream ended at once: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the event stream did not open within 10s")
		}
	}
	return func() []v1.Event {
		t.Helper()
		// The events of what has returned are published before its answer;
		// give the stream a moment to carry the last ones.
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the event stream: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

func eventTypes(evs []v1.Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return s
}

// TestEventsByRunID: a real server on the default backend streams the
// events of one caller's run id only, with the caller's ids on each; a
// program that fails and a function that raises are each one attempt,
// never retried.
func TestEventsByRunID(t *testing.T) {
	testutil.RequiresRoot(t, "serve")
	const token = "events-secret"
	s := startServer(t, []string{"EXECBOX_TOKEN=" + token, "EXECBOX_SERVER_PUBLIC_METRICS=true"})
	c := s.client(token)
	stop := watch(t, s, c, v1.EventFilter{Caller: v1.Caller{RunID: "run-a"}})

	a := client.WithCaller(context.Background(), v1.Caller{RunID: "run-a", NodeName: "plan", ToolCallID: "call-1"})
	b := client.WithCaller(context.Background(), v1.Caller{RunID: "run-b"})
	if res, err := c.Run(a, &v1.RunRequest{Command: []string{"sh", "-c", "exit 3"}}); err != nil || res.ExitCode != 3 {
		t.Fatalf("run a: %+v %v", res, err)
	}
	if _, err := c.Run(b, &v1.RunRequest{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Execute(a, &v1.FunctionRequest{Code: "def main():\n    raise ValueError('no')\n"})
	if err != nil || r.OK || r.Code != "user_error" {
		t.Fatalf("function a: %+v %v", r, err)
	}
	evs := stop()
	want := []string{event.Started, event.Completed, event.Started, event.Completed}
	if got := eventTypes(evs); !slices.Equal(got, want) {
		t.Fatalf("events of run-a: %v, want %v (%+v)", got, want, evs)
	}
	for i, e := range evs {
		if e.RunID != "run-a" || e.NodeName != "plan" || e.ToolCallID != "call-1" || e.Owner != "default" || e.RequestID == "" || e.Attempt != 1 {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if evs[0].Kind != event.KindRun || evs[2].Kind != event.KindFunction || *evs[1].ExitCode != 3 || evs[1].Backend == "" || evs[1].Isolation == "" {
		t.Errorf("kinds, exit code, backend: %+v", evs)
	}
	// The audit log keeps the caller's names too, and finds its rows by run.
	au, err := c.Audit(context.Background(), v1.AuditQuery{RunID: "run-a"})
	if err != nil || len(au.Records) != 2 {
		t.Fatalf("audit rows of run-a: %+v %v, want the run and the function", au, err)
	}
	for _, r := range au.Records {
		if r.NodeName != "plan" || r.ToolCallID != "call-1" || r.RequestID == "" {
			t.Errorf("audit row %+v", r)
		}
	}
}

// TestRetriesForAnUnavailableEngine: with the docker backend configured
// and no engine behind its socket, a run is tried 1 + retries.max times,
// each attempt an event, then fails backend_unavailable.
func TestRetriesForAnUnavailableEngine(t *testing.T) {
	testutil.RequiresRoot(t, "serve")
	s := startServer(t, []string{"EXECBOX_TOKEN=t", "EXECBOX_BACKEND=docker", "DOCKER_HOST=unix:///nonexistent/docker.sock",
		"EXECBOX_RETRIES_MAX=2", "EXECBOX_RETRIES_BACKOFF=50ms", "EXECBOX_SERVER_PUBLIC_METRICS=true"})
	c := s.client("t")
	stop := watch(t, s, c, v1.EventFilter{Caller: v1.Caller{RunID: "retry"}})
	_, err := c.Run(client.WithCaller(context.Background(), v1.Caller{RunID: "retry"}), &v1.RunRequest{Command: []string{"true"}})
	if code := sandbox.CodeOf(err); code != "backend_unavailable" {
		t.Fatalf("run: %v, want backend_unavailable", err)
	}
	evs := stop()
	want := []string{event.Started, event.Retrying, event.Started, event.Retrying, event.Started, event.Failed}
	if got := eventTypes(evs); !slices.Equal(got, want) {
		t.Fatalf("events: %v, want %v", got, want)
	}
	for i, e := range evs {
		if e.Attempt != i/2+1 || (e.Type != event.Started && e.ErrorCode != "backend_unavailable") || (e.Type == event.Retrying && e.Delay <= 0) {
			t.Errorf("event %d: %+v", i, e)
		}
	}
}

// TestWebhook: a real server POSTs each event to the configured webhook,
// signed with the key in the secret file.
func TestWebhook(t *testing.T) {
	testutil.RequiresRoot(t, "serve")
	secret := []byte("a-webhook-secret-of-32-bytes!!!!")
	file := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(file, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan v1.Event, 64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if sig := r.Header.Get(webhook.HeaderSignature); !hmac.Equal([]byte(sig), []byte(webhook.Sign(secret, r.Header.Get(webhook.HeaderTimestamp), body))) {
			t.Errorf("a delivery signed %q does not match", sig)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e v1.Event
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("a delivery %s: %v", body, err)
		}
		got <- e
	}))
	defer hook.Close()
	s := startServer(t, []string{"EXECBOX_TOKEN=t", "EXECBOX_EVENTS_WEBHOOK_URL=" + hook.URL + "/execbox", "EXECBOX_EVENTS_WEBHOOK_SECRET_FILE=" + file})
	c := s.client("t")
	if _, err := c.Run(client.WithCaller(context.Background(), v1.Caller{RunID: "hooked"}), &v1.RunRequest{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{event.Started, event.Completed} {
		select {
		case e := <-got:
			if e.Type != want || e.RunID != "hooked" {
				t.Errorf("delivered %+v, want %s of run hooked", e, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s delivered within 10s", want)
		}
	}

	// A session open at shutdown: its closing reaches the webhook too (the
	// sender is closed after the engine).
	sess, err := c.CreateSession(context.Background(), &v1.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Type != event.SessionCreated || e.Session != sess.ID {
			t.Errorf("delivered %+v, want session.created", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no session.created delivered within 10s")
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
	select {
	case e := <-got:
		if e.Type != event.SessionClosed || e.Session != sess.ID || e.Reason != "shutdown" {
			t.Errorf("delivered %+v, want session.closed (shutdown)", e)
		}
	default:
		t.Error("the session closed at shutdown was not delivered before serve exited")
	}

	// A secret file others may read is refused at start.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := launch(t, []string{"EXECBOX_EVENTS_WEBHOOK_URL=" + hook.URL, "EXECBOX_EVENTS_WEBHOOK_SECRET_FILE=" + file}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("serve with a world-readable webhook secret: %v", err)
	}
}

// TestResultSources: a real server's run result says the limits it had
// and where each came from: the call (wall), the configuration (memory,
// set by the environment) or execbox's defaults (pids); the backend from
// the configuration, the network by default.
func TestResultSources(t *testing.T) {
	testutil.RequiresRoot(t, "serve")
	s := startServer(t, []string{"EXECBOX_LIMITS_MEMORY=300m", "EXECBOX_BACKEND=native"})
	res, err := s.client("").Run(context.Background(), &v1.RunRequest{Command: []string{"true"}, Limits: sandbox.Limits{Wall: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"wall": "call", "memory": "config", "pids": "default", "backend": "config", "network": "default"} {
		if res.Sources[k] != want {
			t.Errorf("sources[%s] = %q, want %q (%v)", k, res.Sources[k], want, res.Sources)
		}
	}
	if res.Limits == nil || res.Limits.Memory != 300*sandbox.MiB || res.Limits.Wall != 5*time.Second || res.Limits.Pids != sandbox.Defaults.Pids {
		t.Errorf("limits %+v", res.Limits)
	}
}
