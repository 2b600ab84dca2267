package agent

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// TerminalRequest is a program to run on a terminal (a PTY in the sandbox).
type TerminalRequest struct {
	Args       []string
	Env        map[string]string
	Dir        string
	Rows, Cols int
	// Buffer bounds the output kept for the reader; past it the oldest
	// is dropped (a terminal's scrollback, not a log).
	Buffer int
	// OnExit, when set, is given the CPU time the program and the orphans
	// it left used, once the agent reports its end (not when the agent is
	// lost first).
	OnExit func(cpu time.Duration)
}

// Terminal is a program running on a PTY in the sandbox. Its output is
// kept (within Buffer) until read; one reader at a time is expected.
type Terminal struct {
	a  *Agent
	id string

	mu      sync.Mutex
	buf     []byte
	dropped int64
	exit    *TerminalExit
	wake    chan struct{} // closed and replaced when output or the exit arrives
	limit   int
	onExit  func(cpu time.Duration)
	release func()
	reader  atomic.Bool // a reader holds it (Claim)
}

// TerminalExit is how a terminal's program ended.
type TerminalExit struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
}

// OpenTerminal starts req's program on a new PTY of req.Rows × req.Cols.
func (a *Agent) OpenTerminal(ctx context.Context, req TerminalRequest) (*Terminal, error) {
	p := &sandbox.Process{Args: req.Args, Env: req.Env, Dir: req.Dir}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &Terminal{a: a, wake: make(chan struct{}), limit: max(req.Buffer, 4096), onExit: req.OnExit}
	id, unregister, err := a.register(t.on)
	if err != nil {
		return nil, err
	}
	t.id, t.release = id, unregister
	err = a.send(ctx, map[string]any{"op": "start", "id": id, "args": req.Args, "env": maps.Clone(req.Env), "dir": req.Dir,
		"rows": max(req.Rows, 1), "cols": max(req.Cols, 1)})
	if err != nil {
		unregister()
		return nil, err
	}
	return t, nil
}

// on takes the agent's frames for t.
func (t *Terminal) on(f frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case f.Out != "":
		t.buf = append(t.buf, f.Data...)
		if over := len(t.buf) - t.limit; over > 0 {
			t.buf = append(t.buf[:0], t.buf[over:]...)
			t.dropped += int64(over)
		}
	case f.Exit != nil:
		t.exit = &TerminalExit{ExitCode: f.Exit.Code, Signal: f.Exit.Signal, Error: f.Exit.Error}
		if f.Exit.Signal != "" {
			t.exit.ExitCode = -1
		}
		t.release()
		if t.onExit != nil {
			// On the agent's reader, which it must not hold up: the
			// callee only counts.
			t.onExit(time.Duration(f.Exit.CPU))
		}
	case f.Error != nil:
		t.exit = &TerminalExit{ExitCode: -1, Error: f.Error.Message}
		t.release()
	default:
		return
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

// Read waits for output or the end: it returns the output kept since the
// last Read (and how many bytes were dropped before it), or, once all of
// it is read, the program's exit. It returns ctx's error when ctx ends
// first.
func (t *Terminal) Read(ctx context.Context) (data []byte, dropped int64, exit *TerminalExit, err error) {
	for {
		t.mu.Lock()
		if len(t.buf) > 0 || t.dropped > 0 {
			data, dropped = t.buf, t.dropped
			t.buf, t.dropped = nil, 0
			t.mu.Unlock()
			return data, dropped, nil, nil
		}
		if t.exit != nil {
			e := *t.exit
			t.mu.Unlock()
			return nil, 0, &e, nil
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, 0, nil, ctx.Err()
		}
	}
}

// Exit is how the program ended, or nil while it runs.
func (t *Terminal) Exit() *TerminalExit {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit == nil {
		return nil
	}
	e := *t.exit
	return &e
}

// Write types data into the terminal.
func (t *Terminal) Write(ctx context.Context, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), inputChunk)
		if err := t.a.send(ctx, map[string]any{"op": "input", "id": t.id, "data": data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// Resize sets the terminal's size and returns once the agent has set it:
// from then on the program reads the new size (and got SIGWINCH).
func (t *Terminal) Resize(ctx context.Context, rows, cols int) error {
	if rows < 1 || cols < 1 || rows > 10000 || cols > 10000 {
		return sandbox.Errorf(sandbox.ErrInvalid, "size_invalid", "rows and cols must be within 1…10000")
	}
	got := make(chan frame, 1)
	rid, unregister, err := t.a.register(func(f frame) {
		select {
		case got <- f:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer unregister()
	if err := t.a.send(ctx, map[string]any{"op": "resize", "id": t.id, "req": rid, "rows": rows, "cols": cols}); err != nil {
		return err
	}
	wait := time.NewTimer(writeWait)
	defer wait.Stop()
	select {
	case f := <-got:
		if f.Error != nil {
			if f.Error.Code == "terminal_ended" {
				return sandbox.Errorf(sandbox.ErrInvalid, "terminal_ended", "%s", f.Error.Message)
			}
			return agentError(f)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-wait.C:
		// A live agent answers at once.
		t.a.wedged(writeWait)
		return t.a.Err()
	}
}

// Kill ends the program and everything it started.
func (t *Terminal) Kill(ctx context.Context) error {
	return t.a.send(ctx, map[string]any{"op": "signal", "id": t.id, "sig": "SIGKILL"})
}

// Claim makes the caller t's one reader until it calls release; false when
// another reader holds it.
func (t *Terminal) Claim() (release func(), ok bool) {
	if !t.reader.CompareAndSwap(false, true) {
		return nil, false
	}
	return func() { t.reader.Store(false) }, true
}
