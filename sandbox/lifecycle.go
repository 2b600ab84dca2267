package sandbox

import (
	"context"
	"sync"
)

// Lifecycle is the operation bookkeeping every Sandbox implementation
// embeds: it counts running operations, lets one Exec run at a time,
// remembers that Exec's cancel func, and refuses new operations once Close
// has begun. Its zero value is ready; it must not be copied after first
// use. All methods are safe for concurrent use.
//
// Use:
//
//	func (s *Sandbox) Exec(ctx, p) (*Result, error) {
//		ctx, cancel := context.WithCancel(ctx)
//		defer cancel()
//		end, err := s.life.BeginExec(s.id, cancel)
//		if err != nil { return nil, err } // sandbox_closed, or sandbox_busy
//		defer end()
//		…
//	}
//	func (s *Sandbox) WriteFiles(ctx, files) error {
//		if err := s.life.Begin(s.id, nil); err != nil { return err }
//		defer s.life.Done()
//		…
//	}
//	func (s *Sandbox) Close(ctx) error {
//		if !s.life.Close() { return nil }
//		// release resources: no operation runs any more
//	}
type Lifecycle struct {
	mu      sync.Mutex
	closed  bool
	execing bool               // an Exec registered with BeginExec runs
	cancel  context.CancelFunc // of the running Exec
	running sync.WaitGroup
	// closing ends when Close begins: BeginOp's contexts follow it. Made
	// by the first BeginOp.
	closing    context.Context
	endClosing context.CancelFunc
}

// CodeBusy is the code of the error a second concurrent Exec gets.
const CodeBusy = "sandbox_busy"

// BeginExec registers an Exec, which must end by calling end (once). At
// most one Exec runs at a time: while one runs, BeginExec refuses at once
// with ErrBusy code "sandbox_busy" naming sandbox id, and the caller must
// run nothing. cancel is what Close calls to end the Exec. After Close,
// BeginExec refuses with ErrNotFound code "sandbox_closed".
func (l *Lifecycle) BeginExec(id string, cancel context.CancelFunc) (end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, Errorf(ErrNotFound, "sandbox_closed", "sandbox %s is closed", id)
	}
	if l.execing {
		return nil, Errorf(ErrBusy, CodeBusy, "sandbox %s is running another Exec; a sandbox runs one Exec at a time", id)
	}
	l.execing, l.cancel = true, cancel
	l.running.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.execing, l.cancel = false, nil
			l.mu.Unlock()
			l.running.Done()
		})
	}, nil
}

// Begin registers an operation other than an Exec (WriteFiles, Artifacts),
// which must end with Done; any number of them may run, alongside an Exec
// too. After Close, Begin refuses with ErrNotFound code "sandbox_closed"
// naming sandbox id.
//
// A non-nil cancel registers an Exec the older way: Close calls cancel to
// end it, but the one-Exec-at-a-time rule is not enforced for it. New code
// uses BeginExec.
func (l *Lifecycle) Begin(id string, cancel context.CancelFunc) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Errorf(ErrNotFound, "sandbox_closed", "sandbox %s is closed", id)
	}
	if cancel != nil {
		l.cancel = cancel
	}
	l.running.Add(1)
	return nil
}

// BeginOp registers an operation other than an Exec that may take long (a
// file streamed in or out), as Begin does, and returns a context that is
// cancelled when Close begins (its cause the "sandbox_closed" error), so
// that Close, which waits for it, does not wait on a stalled transfer.
// The caller must call end (once) when the operation ends; after Close,
// BeginOp refuses with ErrNotFound "sandbox_closed".
func (l *Lifecycle) BeginOp(ctx context.Context, id string) (_ context.Context, end func(), _ error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, Errorf(ErrNotFound, "sandbox_closed", "sandbox %s is closed", id)
	}
	if l.closing == nil {
		l.closing, l.endClosing = context.WithCancel(context.Background())
	}
	l.running.Add(1)
	closing := l.closing
	l.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(closing, func() {
		cancel(Errorf(ErrNotFound, "sandbox_closed", "sandbox %s is closing", id))
	})
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			stop()
			cancel(nil)
			l.running.Done()
		})
	}, nil
}

// Done ends an operation Begin registered.
func (l *Lifecycle) Done() { l.running.Done() }

// Close marks the lifecycle closed, cancels the running Exec and waits for
// every registered operation to end. It reports true only the first time,
// when the caller is to release the sandbox's resources.
func (l *Lifecycle) Close() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	if l.cancel != nil {
		l.cancel()
	}
	if l.endClosing != nil {
		l.endClosing()
	}
	l.mu.Unlock()
	l.running.Wait()
	return true
}
