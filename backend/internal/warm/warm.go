package warm

import (
	"context"
	"sync"
)

// MaxShapes bounds how many shapes keep warm machines: each holds its
// memory while it waits.
const MaxShapes = 2

// Pool keeps up to size machines of type V per shape K, for the MaxShapes
// shapes used last.
type Pool[K comparable, V any] struct {
	size  int
	alive func(V) bool // still able to serve
	kill  func(V)      // ends a machine for good

	mu       sync.Mutex
	idle     map[K][]V
	starting map[K]int
	order    []K // shapes by last use, newest last
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // starts and background kills
}

// New returns a pool keeping size machines per shape (0: none).
func New[K comparable, V any](size int, alive func(V) bool, kill func(V)) *Pool[K, V] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool[K, V]{size: size, alive: alive, kill: kill, idle: map[K][]V{}, starting: map[K]int{}, ctx: ctx, cancel: cancel}
}

// Take returns a warm machine of shape k that is still alive, or false.
func (p *Pool[K, V]) Take(k K) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle[k]) > 0 {
		v := p.idle[k][0]
		p.idle[k] = p.idle[k][1:]
		if p.alive(v) {
			return v, true
		}
		p.killLater(v)
	}
	var zero V
	return zero, false
}

// Refill marks k as just used and runs start in the background until size
// machines of shape k wait or are on their way; the shape used longest ago
// beyond MaxShapes loses its machines. start gets a context that ends at
// Close.
func (p *Pool[K, V]) Refill(k K, start func(context.Context) (V, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.size == 0 {
		return
	}
	p.touch(k)
	for n := len(p.idle[k]) + p.starting[k]; n < p.size; n++ {
		p.starting[k]++
		p.wg.Add(1)
		go p.start(k, start)
	}
}

func (p *Pool[K, V]) touch(k K) {
	for i, o := range p.order {
		if o == k {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	p.order = append(p.order, k)
	for len(p.order) > MaxShapes {
		old := p.order[0]
		p.order = p.order[1:]
		for _, v := range p.idle[old] {
			p.killLater(v)
		}
		delete(p.idle, old)
	}
}

func (p *Pool[K, V]) start(k K, start func(context.Context) (V, error)) {
	defer p.wg.Done()
	v, err := start(p.ctx)
	p.mu.Lock()
	p.starting[k]--
	keep := err == nil && !p.closed && p.kept(k)
	if keep {
		p.idle[k] = append(p.idle[k], v)
	}
	p.mu.Unlock()
	if err == nil && !keep {
		p.kill(v)
	}
}

func (p *Pool[K, V]) kept(k K) bool {
	for _, o := range p.order {
		if o == k {
			return true
		}
	}
	return false
}

// killLater ends v in the background; Close waits for it. p.mu is held
// and the pool is not closed.
func (p *Pool[K, V]) killLater(v V) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.kill(v)
	}()
}

// Idle returns the machines of shape k waiting, in the order Take would
// give them.
func (p *Pool[K, V]) Idle(k K) []V {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]V(nil), p.idle[k]...)
}

// Pending is how many machines of shape k wait or are being started.
func (p *Pool[K, V]) Pending(k K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[k]) + p.starting[k]
}

// Len is how many machines wait, all shapes together.
func (p *Pool[K, V]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, vs := range p.idle {
		n += len(vs)
	}
	return n
}

// Close cancels the starts under way, waits for them, and ends every
// waiting machine.
func (p *Pool[K, V]) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = map[K][]V{}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	var wg sync.WaitGroup
	for _, vs := range idle {
		for _, v := range vs {
			wg.Go(func() { p.kill(v) })
		}
	}
	wg.Wait()
}
