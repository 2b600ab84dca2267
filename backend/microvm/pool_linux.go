package microvm

import (
	"context"
	"sync"

	"github.com/execbox/execbox/internal/hostview"
)

// pool keeps booted VMs whose agent waits for its one sandbox, per shape,
// so that Create skips the boot. Each VM serves one sandbox, then goes.
type pool struct {
	b    *Backend
	size int // VMs kept per shape

	mu      sync.Mutex
	idle    map[shape][]*machine
	booting map[shape]int
	order   []shape // shapes by last use, newest last
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// maxShapes bounds how many shapes keep warm VMs (each VM holds its RAM
// as far as the guest touched it).
const maxShapes = 2

func newPool(b *Backend, size int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{b: b, size: size, idle: map[shape][]*machine{}, booting: map[shape]int{}, ctx: ctx, cancel: cancel}
}

// take returns a warm VM of shape sh, or nil.
func (p *pool) take(sh shape) *machine {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle[sh]) > 0 {
		m := p.idle[sh][0]
		p.idle[sh] = p.idle[sh][1:]
		if m.alive() {
			return m
		}
		go m.kill()
	}
	return nil
}

// refill boots VMs of shape sh in the background until size wait, and
// drops the warm VMs of the shape used longest ago beyond maxShapes.
func (p *pool) refill(sh shape, view *hostview.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.size == 0 {
		return
	}
	p.touch(sh)
	for n := len(p.idle[sh]) + p.booting[sh]; n < p.size; n++ {
		p.booting[sh]++
		p.wg.Add(1)
		go p.boot(sh, view)
	}
}

// touch marks sh as just used, evicting the oldest shape over maxShapes.
func (p *pool) touch(sh shape) {
	for i, o := range p.order {
		if o == sh {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	p.order = append(p.order, sh)
	for len(p.order) > maxShapes {
		old := p.order[0]
		p.order = p.order[1:]
		for _, m := range p.idle[old] {
			go m.kill()
		}
		delete(p.idle, old)
	}
}

func (p *pool) boot(sh shape, view *hostview.View) {
	defer p.wg.Done()
	h := p.b.Host()
	var m *machine
	var err error
	if h.Err == nil {
		m, err = p.b.boot(p.ctx, h, h.Own.accel, sh, view)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.booting[sh]--
	if m == nil || err != nil {
		return
	}
	if p.closed || !p.kept(sh) {
		go m.kill()
		return
	}
	p.idle[sh] = append(p.idle[sh], m)
}

func (p *pool) kept(sh shape) bool {
	for _, o := range p.order {
		if o == sh {
			return true
		}
	}
	return false
}

// close stops the boots and kills the warm VMs.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = map[shape][]*machine{}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	for _, ms := range idle {
		for _, m := range ms {
			m.kill()
		}
	}
}
