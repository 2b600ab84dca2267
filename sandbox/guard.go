package sandbox

import (
	"context"
	"sync"
)

// Guard is the operation lifecycle every Sandbox implementation needs: it
// counts running operations, remembers the cancel func of the running Exec,
// and refuses new operations once Close has begun. Its zero value is ready;
// it must not be copied after first use. All methods are safe for
// concurrent use.
//
// Use:
//
//	if err := s.guard.Begin(s.id, cancel); err != nil { return err }
//	defer s.guard.Done()
//	…
//	func (s *Sandbox) Close(ctx) error {
//		if !s.guard.Close() { return nil }
//		// release resources: no operation runs any more
//	}
type Guard struct {
	mu      sync.Mutex
	closed  bool
	cancel  context.CancelFunc // of the running Exec
	running sync.WaitGroup
}

// Begin registers an operation, which must end with Done. A non-nil cancel
// (an Exec's) is what Close calls to end it. After Close, Begin refuses with
// ErrNotFound code "sandbox_closed" naming sandbox id.
func (g *Guard) Begin(id string, cancel context.CancelFunc) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return Errorf(ErrNotFound, "sandbox_closed", "sandbox %s is closed", id)
	}
	if cancel != nil {
		g.cancel = cancel
	}
	g.running.Add(1)
	return nil
}

// Done ends an operation Begin registered.
func (g *Guard) Done() { g.running.Done() }

// Close marks the guard closed, cancels the running Exec and waits for
// every registered operation to end. It reports true only the first time,
// when the caller is to release the sandbox's resources.
func (g *Guard) Close() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()
	g.running.Wait()
	return true
}
