package mcpserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The in-process answer streams: the caller has the status and the first
// bytes while the handler still writes (it waits for them to be read), the
// Authorization header arrives as it came, and an answer cut short or a
// handler that panics is an error reading the body, not a whole answer.
func TestInProcess(t *testing.T) {
	read := make(chan struct{})
	var ended atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("X-Auth", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "first")
			select {
			case <-read:
			case <-time.After(10 * time.Second):
			}
			io.WriteString(w, "second")
			ended.Store(true)
		case "/cut":
			io.WriteString(w, "part")
			panic(http.ErrAbortHandler)
		case "/panic":
			panic("boom")
		case "/wait":
			<-r.Context().Done()
		}
	})
	hc := &http.Client{Transport: inProcess{h: h, auth: "bEaReR tok"}}

	resp, err := hc.Get("http://localhost/stream")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Auth") != "bEaReR tok" {
		t.Errorf("status %d, Authorization %q", resp.StatusCode, resp.Header.Get("X-Auth"))
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("the first bytes, while the handler waits: %q %v", buf, err)
	}
	if ended.Load() {
		t.Error("the answer was held until its handler ended")
	}
	close(read)
	if rest, err := io.ReadAll(resp.Body); err != nil || string(rest) != "second" {
		t.Errorf("the rest: %q %v", rest, err)
	}

	for _, path := range []string{"/cut", "/panic"} {
		resp, err := hc.Get("http://localhost" + path)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %q, %v", path, b, err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://localhost/wait", nil)
	if _, err := hc.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call whose context ends before the answer: %v", err)
	}
}
