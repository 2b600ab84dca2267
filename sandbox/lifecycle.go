package sandbox

import (
	"context"
	"sync"
)

// Lifecycle is the operation lifecycle every Sandbox implementation needs:
// it counts running operations, remembers the cancel func of the running
// Exec, and refuses new operations once Close has begun. Its zero value is
// ready; it must not be copied after first use. All methods are safe for
// concurrent use.
//
// Use:
//
//	if err := s.life.Begin(s.id, cancel); err != nil { return err }
//	defer s.life.Done()
//	…
//	func (s *Sandbox) Close(ctx) error {
//		if !s.life.Close() { return nil }
//		// release resources: no operation runs any more
//	}
type Lifecycle struct {
	mu      sync.Mutex
	closed  bool
	cancel  context.CancelFunc // of the running Exec
	running sync.WaitGroup
}

// Begin registers an operation, which must end with Done. A non-nil cancel
// (an Exec's) is what Close calls to end it. After Close, Begin refuses with
// ErrNotFound code "sandbox_closed" naming sandbox id.
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
	l.mu.Unlock()
	l.running.Wait()
	return true
}
