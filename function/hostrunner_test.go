package function

import (
	"context"
	"sync"
	"testing"

	"github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/sandbox"
)

// hostRunner runs the function protocol's processes on the real local
// backend (real python3 / node, a fresh work dir, the allowlisted
// environment, the wall and output limits), counting how many run at once.
type hostRunner struct {
	b sandbox.Backend

	mu      sync.Mutex
	running int
	peak    int
}

func newHostRunner(t testing.TB) *hostRunner {
	t.Helper()
	b, err := local.New(sandbox.Settings{WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(sandbox.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	return &hostRunner{b: b}
}

func (h *hostRunner) Run(ctx context.Context, _ sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	h.mu.Lock()
	h.running++
	h.peak = max(h.peak, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	return sandbox.Run(ctx, h.b, spec, p)
}

func (h *hostRunner) peakRunning() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}
