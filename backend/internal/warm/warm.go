package warm

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// MaxShapes bounds how many shapes keep warm machines: each holds its
// memory while it waits.
const MaxShapes = 2

// Window is the time constant of a shape's arrival rate: the rate follows
// a change in demand within seconds, and a shape that stops being asked
// for falls back to Sizing.Min within a few windows.
const Window = 10 * time.Second

// Sizing is how many machines a shape keeps waiting: Min always (while it
// is one of the MaxShapes used last), and up to Max while its arrivals
// need more — enough to serve the arrivals of the time one takes to start.
type Sizing struct{ Min, Max int }

// Pool keeps machines of type V per shape K, for the MaxShapes shapes
// used last, as many as each one's demand needs within its Sizing.
type Pool[K comparable, V any] struct {
	sizing Sizing
	alive  func(V) bool // still able to serve
	kill   func(V)      // ends a machine for good
	now    func() time.Time

	mu       sync.Mutex
	idle     map[K][]V
	starting map[K]int
	starter  map[K]func(context.Context) (V, error) // the last Refill's
	demand   map[K]*demand
	order    []K // shapes by last use, newest last
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // starts, background kills and the trimmer
}

// demand is what a shape's target is made of.
type demand struct {
	rate   float64   // arrivals per second, decayed over Window
	at     time.Time // when rate was last brought forward
	refill time.Duration
}

// New returns a pool keeping machines per shape as s says (Max below Min
// is Min: a fixed size). When Max > Min a trimmer ends, every trim
// period, the waiting machines a shape no longer needs.
func New[K comparable, V any](s Sizing, alive func(V) bool, kill func(V)) *Pool[K, V] {
	return newPool[K](s, alive, kill, time.Now, time.Second)
}

func newPool[K comparable, V any](s Sizing, alive func(V) bool, kill func(V), now func() time.Time, trim time.Duration) *Pool[K, V] {
	s.Min = max(s.Min, 0)
	s.Max = max(s.Max, s.Min)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[K, V]{sizing: s, alive: alive, kill: kill, now: now, idle: map[K][]V{}, starting: map[K]int{},
		starter: map[K]func(context.Context) (V, error){}, demand: map[K]*demand{}, ctx: ctx, cancel: cancel}
	if s.Max > s.Min && trim > 0 {
		p.wg.Go(func() {
			t := time.NewTicker(trim)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					p.Trim()
				}
			}
		})
	}
	return p
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

// demandOf is k's demand with its rate decayed to now. p.mu is held.
func (p *Pool[K, V]) demandOf(k K) *demand {
	now := p.now()
	d := p.demand[k]
	if d == nil {
		d = &demand{at: now}
		p.demand[k] = d
	}
	if dt := now.Sub(d.at); dt > 0 {
		d.rate *= math.Exp(-dt.Seconds() / Window.Seconds())
		d.at = now
	}
	return d
}

// target is how many machines of shape k should wait or be on their way:
// the arrivals expected while one starts (rate × start time), one
// standard deviation more (arrivals come at random), rounded (demand
// decays without end: below half a machine it is none), within the
// sizing; one, to learn the start time, while no start was timed.
// p.mu is held.
func (p *Pool[K, V]) target(k K) int {
	d := p.demandOf(k)
	n := d.rate * d.refill.Seconds()
	want := int(math.Round(n + math.Sqrt(n)))
	if d.refill == 0 && d.rate > 0 {
		want = 1
	}
	return min(max(want, p.sizing.Min), p.sizing.Max)
}

// Refill counts an arrival of shape k (the caller took a machine or
// started its own), marks k as just used and runs start in the background
// until its target of machines of shape k wait or are on their way — and
// again each time one started, while the target (which that start's time
// changes) is not reached; the shape used longest ago beyond MaxShapes
// loses its machines. start gets a context that ends at Close.
func (p *Pool[K, V]) Refill(k K, start func(context.Context) (V, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.sizing.Max == 0 {
		return
	}
	p.touch(k) // after which only the MaxShapes kept have a demand
	p.demandOf(k).rate += 1 / Window.Seconds()
	p.starter[k] = start
	p.fill(k)
}

// fill starts machines of shape k up to its target. p.mu is held.
func (p *Pool[K, V]) fill(k K) {
	for n := len(p.idle[k]) + p.starting[k]; n < p.target(k); n++ {
		p.starting[k]++
		p.wg.Add(1)
		go p.start(k, p.starter[k])
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
		delete(p.demand, old)
		delete(p.starter, old)
	}
}

func (p *Pool[K, V]) start(k K, start func(context.Context) (V, error)) {
	defer p.wg.Done()
	t0 := p.now()
	v, err := start(p.ctx)
	took := p.now().Sub(t0)
	p.mu.Lock()
	p.starting[k]--
	keep := err == nil && !p.closed && p.kept(k)
	if keep {
		p.idle[k] = append(p.idle[k], v)
		// The start time, smoothed: one slow start moves it a third.
		if d := p.demandOf(k); d.refill == 0 {
			d.refill = took
		} else {
			d.refill += (took - d.refill) / 3
		}
		p.fill(k)
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

// Trim ends the waiting machines of each shape beyond its target now (the
// ones that waited longest first): demand fell. The trimmer calls it.
func (p *Pool[K, V]) Trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for k, vs := range p.idle {
		extra := len(vs) + p.starting[k] - p.target(k)
		for ; extra > 0 && len(p.idle[k]) > 0; extra-- {
			p.killLater(p.idle[k][0])
			p.idle[k] = p.idle[k][1:]
		}
	}
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

// Shape is one shape's machines and why it keeps that many.
type Shape[K comparable] struct {
	Key      K
	Idle     int           // waiting
	Starting int           // on their way
	Target   int           // what it keeps: Idle + Starting reach it
	Rate     float64       // arrivals per second lately
	Start    time.Duration // the time one takes to start, smoothed
}

// Why says how the target came about.
func (s Shape[K]) Why(z Sizing) string {
	if z.Max == z.Min {
		return fmt.Sprintf("a fixed %d", z.Min)
	}
	return fmt.Sprintf("%.2f arrivals/s × %.2f s to start one (+1σ), within %d..%d", s.Rate, s.Start.Seconds(), z.Min, z.Max)
}

// Sizing is the pool's sizing.
func (p *Pool[K, V]) Sizing() Sizing { return p.sizing }

// Shapes reports each shape kept, used longest ago first.
func (p *Pool[K, V]) Shapes() []Shape[K] {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Shape[K], 0, len(p.order))
	for _, k := range p.order {
		d := p.demandOf(k)
		out = append(out, Shape[K]{Key: k, Idle: len(p.idle[k]), Starting: p.starting[k], Target: p.target(k), Rate: d.rate, Start: d.refill})
	}
	return out
}

// Report is what Shapes says, as a backend's sandbox.Warmer answers,
// each shape named by name.
func (p *Pool[K, V]) Report(name func(K) string) []sandbox.Warm {
	var out []sandbox.Warm
	for _, s := range p.Shapes() {
		out = append(out, sandbox.Warm{Shape: name(s.Key), Idle: s.Idle, Starting: s.Starting, Target: s.Target, Why: s.Why(p.sizing)})
	}
	return out
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
