package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// The suite never waits for a wall-clock window to pass: a program that
// must wait for the host reads a gate on its stdin, and the host waits for
// lines the program prints (a watch). Durations appear only as bounds
// that a hang must pass before a check fails (the backend's own wall
// limits, opTimeout), never as the thing a check measures.

// gate is a Process.Stdin that gives the program nothing until the host
// opens it, then the line it was opened with, then EOF. It gives EOF at
// once when the test ends, so no backend goroutine stays blocked on it.
type gate struct {
	once   sync.Once
	opened chan struct{}
	line   []byte
	stop   <-chan struct{}
	rest   *bytes.Reader
}

// newGate returns a gate that ends (EOF) when t ends.
func newGate(t *testing.T) *gate {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return &gate{opened: make(chan struct{}), stop: stop}
}

// open lets line (e.g. "go\n") through. Only the first call counts.
func (g *gate) open(line string) {
	g.once.Do(func() {
		g.line = []byte(line)
		close(g.opened)
	})
}

func (g *gate) Read(p []byte) (int, error) {
	if g.rest == nil {
		select {
		case <-g.opened:
			g.rest = bytes.NewReader(g.line)
		case <-g.stop:
			return 0, io.EOF
		}
	}
	return g.rest.Read(p)
}

// watch is a concurrency-safe buffer for Process.Stdout or Stderr that
// closes seen once it holds want.
type watch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
	// lines is signalled (without blocking) on every write, for waitLines.
	lines chan struct{}
}

func newWatch(want string) *watch {
	return &watch{want: want, seen: make(chan struct{}), lines: make(chan struct{}, 1)}
}

func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	select {
	case w.lines <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// countPrefix counts the lines of what was written so far that start with
// prefix.
func (w *watch) countPrefix(prefix string) int {
	n := 0
	for _, l := range strings.Split(w.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// waitFor blocks until cond holds for what was written, or until stop is
// closed or bound passes (a hang guard); it reports whether cond held.
func (w *watch) waitFor(cond func(string) bool, stop <-chan struct{}, bound time.Duration) bool {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		if cond(w.String()) {
			return true
		}
		select {
		case <-w.lines:
		case <-stop:
			return cond(w.String())
		case <-deadline.C:
			return cond(w.String())
		}
	}
}

// execOutcome is what an Exec returned.
type execOutcome struct {
	res *sandbox.Result
	err error
}

// goExec runs p in sb in a goroutine; the channel gets the outcome.
func goExec(ctx context.Context, sb sandbox.Sandbox, p *sandbox.Process) <-chan execOutcome {
	ch := make(chan execOutcome, 1)
	go func() {
		res, err := sb.Exec(ctx, p)
		ch <- execOutcome{res, err}
	}()
	return ch
}

// execBounded is exec for a check whose failure mode is an Exec that does
// not return: it fails the test, naming what, when Exec has not returned
// opTimeout + 10 s after it started (its context ended at opTimeout).
func (s *suite) execBounded(t *testing.T, sb sandbox.Sandbox, p *sandbox.Process, what string) *sandbox.Result {
	t.Helper()
	select {
	case o := <-goExec(s.ctx(t), sb, p):
		if o.err != nil {
			t.Fatalf("Exec %q: %v", p.Args, o.err)
		}
		if o.res == nil {
			t.Fatalf("Exec %q: nil Result and nil error", p.Args)
		}
		return o.res
	case <-time.After(s.cfg.opTimeout + 10*time.Second):
		t.Fatalf("Exec %q did not return within %v: %s", p.Args, s.cfg.opTimeout+10*time.Second, what)
		return nil
	}
}
