package webhook

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/execbox/execbox/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("0123456789abcdef-secret")

// receiver answers each delivery with the next status of statuses (200
// after them), checking its signature, and records what it took.
type receiver struct {
	t        *testing.T
	mu       sync.Mutex
	statuses []int
	tries    int
	got      []event.Event
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ts := r.Header.Get(HeaderTimestamp)
	if !hmac.Equal([]byte(r.Header.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		rc.t.Errorf("a delivery with a bad signature %q", r.Header.Get(HeaderSignature))
	}
	var e event.Event
	if err := json.Unmarshal(body, &e); err != nil || r.Header.Get(HeaderEvent) != e.Type {
		rc.t.Errorf("body %s (%v), event header %q", body, err, r.Header.Get(HeaderEvent))
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries++
	status := 200
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	if status == 200 {
		rc.got = append(rc.got, e)
	}
	w.WriteHeader(status)
}

func results() (func(string), func() map[string]int) {
	var mu sync.Mutex
	m := map[string]int{}
	return func(r string) { mu.Lock(); m[r]++; mu.Unlock() }, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
}

func TestDeliveries(t *testing.T) {
	rc := &receiver{t: t, statuses: []int{500, 503, 200, 400, 429, 200}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var bus event.Bus
	on, counts := results()
	s, err := Start(&bus, Options{URL: srv.URL + "/hook", Secret: secret, Backoff: time.Millisecond, OnResult: on})
	if err != nil {
		t.Fatal(err)
	}
	bus.Publish(event.Event{Type: event.Started, Caller: event.Caller{RunID: "one"}})   // 500, 503, then taken
	bus.Publish(event.Event{Type: event.Completed, Caller: event.Caller{RunID: "two"}}) // 400: refused, not retried
	bus.Publish(event.Event{Type: event.Failed, Caller: event.Caller{RunID: "three"}})  // 429, then taken
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Close(ctx)
	c := counts()
	if c[Delivered] != 2 || c[Rejected] != 1 || c[Failed] != 0 || rc.tries != 6 {
		t.Errorf("results %v after %d tries, want 2 delivered and 1 rejected in 6", c, rc.tries)
	}
	if len(rc.got) != 2 || rc.got[0].RunID != "one" || rc.got[1].RunID != "three" || rc.got[0].Seq != 1 {
		t.Errorf("received %+v", rc.got)
	}
}

// A receiver that never answers: publishing never waits for it (a block
// would hang the test), the queue bounds what waits and the rest is
// dropped, the timeout ends each try, and Close ends at its deadline (the
// receiver is released only when the test ends).
func TestDeadReceiver(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	var bus event.Bus
	on, counts := results()
	s, err := Start(&bus, Options{URL: srv.URL, Secret: secret, Timeout: 50 * time.Millisecond, Retries: 1, Backoff: time.Millisecond, Queue: 8, OnResult: on})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		bus.Publish(event.Event{Type: event.Started})
	}
	if s.Dropped() < 1000-8-1 {
		t.Errorf("dropped %d of 1000 with a queue of 8", s.Dropped())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s.Close(ctx)
	if counts()[Delivered] != 0 || counts()[Failed] == 0 {
		t.Errorf("results %v", counts())
	}
}

func TestCheck(t *testing.T) {
	for _, o := range []Options{
		{URL: "ftp://x/", Secret: secret}, {URL: "http://u:p@x/", Secret: secret}, {URL: "http:///x", Secret: secret},
		{URL: "https://x/hook", Secret: []byte("short")},
	} {
		if o.Check() == nil {
			t.Errorf("%+v passes", o)
		}
	}
	if err := (Options{URL: "https://hooks.example.com/execbox", Secret: secret}).Check(); err != nil {
		t.Error(err)
	}
}
