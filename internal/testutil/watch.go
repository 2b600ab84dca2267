package testutil

import (
	"strings"
	"sync"
)

// Watch is a Process's Stdout or Stderr that closes Seen once the output
// holds want: a test waits on it for a sign the program got that far,
// instead of sleeping.
type Watch struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

// NewWatch returns a Watch for want.
func NewWatch(want string) *Watch {
	return &Watch{want: want, seen: make(chan struct{})}
}

// Seen is closed once the output holds want.
func (w *Watch) Seen() <-chan struct{} { return w.seen }

func (w *Watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

// String is the output so far.
func (w *Watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
