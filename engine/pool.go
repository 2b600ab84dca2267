package engine

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// PoolOptions configure the warm pools. A pool keeps Size sandboxes of
// one backend and one template (Engine.Pool) fully set up, each with the
// template's process started and waiting on its stdin for a call. A call
// (Engine.Call) takes one, hands it the call and gets the result; the
// sandbox is then closed — never reused, so every call sees a fresh
// filesystem and process — and a new one is made in the background. An
// empty pool means a cold start, never a failure.
type PoolOptions struct {
	// Size is how many ready sandboxes each pool keeps; 0 keeps none.
	Size int
	// Backends are the backends pooled; empty means the one a request
	// that names none gets (auto's pick, or the configured backend).
	Backends []string
	// MaxIdleMemory caps the memory all idle pooled sandboxes hold
	// together: measured where a backend can say (sandbox.Meter), else
	// each counts its memory limit. No sandbox is made that would pass
	// it. 0 means 1 GiB.
	MaxIdleMemory int64
	// Refill is how many sandboxes are made at once, for all pools
	// together; 0 means 1.
	Refill int
	// MaxAge is how long a sandbox waits in a pool before it is replaced;
	// 0 means 10 minutes.
	MaxAge time.Duration
}

// Pool events, as observers get them.
const (
	PoolHit     = "hit"     // a call took a ready sandbox
	PoolMiss    = "miss"    // a call found none ready: a cold start
	PoolMade    = "made"    // a sandbox was made and its runner started
	PoolFailed  = "failed"  // making one failed (see PoolStats.Error)
	PoolLost    = "lost"    // a ready one ended before any call took it
	PoolExpired = "expired" // a ready one reached MaxAge and was replaced
)

// PoolTemplate is what one kind of pooled sandbox is made for: calls of
// Spec (its wall limit aside, which each call sets) running Args, a
// process that reads the whole call from its stdin, so it can be started
// before the call is known. MaxCall is the longest call's time limit.
type PoolTemplate struct {
	Name    string // the pool's name in stats and events (a function language)
	Spec    sandbox.Spec
	Args    []string
	MaxCall time.Duration
}

// PoolEvent is one event of a pool. Took is how long making the sandbox
// took (PoolMade), or the call (PoolHit); Ready is how many are ready now.
type PoolEvent struct {
	Backend  string
	Template string
	Event    string
	Ready    int
	Took     time.Duration
}

// PoolStats describe one pool.
type PoolStats struct {
	Backend string `json:"backend"`
	// Template is the template's name: the daemon's are named for the
	// function language whose runner they keep, as the wire says.
	Template string `json:"language"`
	Size     int    `json:"size"`
	Ready    int    `json:"ready"`
	Filling  int    `json:"filling"`
	Hits     uint64 `json:"hits"`
	Misses   uint64 `json:"misses"`
	Made     uint64 `json:"made"`
	Failed   uint64 `json:"failed"`
	Lost     uint64 `json:"lost"`
	// IdleMemory is what the ready sandboxes hold now (see
	// PoolOptions.MaxIdleMemory).
	IdleMemory int64 `json:"idle_memory_bytes"`
	// LastRefill is how long making the last sandbox took.
	LastRefill time.Duration `json:"last_refill_ns"`
	// Error is why the last attempt to make one failed, until one succeeds.
	Error string `json:"error,omitempty"`
}

func (o PoolOptions) withDefaults() PoolOptions {
	if o.MaxIdleMemory == 0 {
		o.MaxIdleMemory = 1 * sandbox.GiB
	}
	if o.Refill == 0 {
		o.Refill = 1
	}
	if o.MaxAge == 0 {
		o.MaxAge = 10 * time.Minute
	}
	return o
}

func (o PoolOptions) validate() error {
	if o.Size < 0 || o.Size > 64 {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "pools.size %d: want 0 to 64", o.Size)
	}
	if o.MaxIdleMemory < 0 || o.Refill < 0 || o.Refill > 16 || o.MaxAge < 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "pools: max_idle_memory and max_age must not be negative, refill is 1 to 16")
	}
	return nil
}

// Pool sets, once, the templates the warm pools make sandboxes for: one
// pool per template and pooled backend. A template is checked as a call
// of it would be when its pool is made; one that fails shows its error in
// the pool's stats.
func (e *Engine) Pool(templates ...PoolTemplate) error {
	names := map[string]bool{}
	for _, t := range templates {
		if t.Name == "" || names[t.Name] || len(t.Args) == 0 || t.MaxCall <= 0 {
			return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "pool template %q: each needs a name of its own, a command and its longest call", t.Name)
		}
		names[t.Name] = true
	}
	ps := e.pools
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.templates != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "the pools' templates are set once")
	}
	ps.templates = slices.Clone(templates)
	ps.poke()
	return nil
}

// poolMargin is kept between a pooled sandbox's wall limit and the end of
// the longest call it may still take.
const poolMargin = 30 * time.Second

// pools are the engine's warm pools and the loop that fills them.
type pools struct {
	e    *Engine
	opts PoolOptions

	mu        sync.Mutex
	templates []PoolTemplate // Engine.Pool
	byKey     map[poolKey]*pool
	filling   int // sandboxes being made, all pools
	observers []func(PoolEvent)
	closed    bool
	why       string // why there are no pools, when the default backend has none

	wake chan struct{}
	ctx  context.Context // ends at Close: sandboxes being made are abandoned
	stop context.CancelFunc
	wg   sync.WaitGroup // fills and closes under way
}

type poolKey struct {
	backend  string
	template string
}

// pool is one backend's sandboxes for one template.
type pool struct {
	key     poolKey
	b       sandbox.Backend
	tmpl    sandbox.Spec // the calls' spec, wall zeroed (PoolTemplate.Spec)
	spec    sandbox.Spec // the pooled sandboxes' spec, prepared
	args    []string
	ready   []*warm // oldest first
	filling int
	retry   time.Time // no fill before (after a failure)
	backoff time.Duration
	stats   PoolStats
}

// warm is one pooled sandbox whose runner runs, waiting on its stdin.
type warm struct {
	sb     sandbox.Sandbox
	born   time.Time
	wall   time.Duration // the sandbox's wall limit, from born
	mem    int64         // what it holds, measured when it was made (or its limit)
	pr     *io.PipeReader
	pw     *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{} // the runner ended; res and err are set
	res    *sandbox.Result
	err    error
	taken  bool // by a call, or for closing (under pools.mu)
}

func newPools(e *Engine, o PoolOptions) *pools {
	ctx, stop := context.WithCancel(context.Background())
	return &pools{e: e, opts: o, byKey: map[poolKey]*pool{}, wake: make(chan struct{}, 1), ctx: ctx, stop: stop}
}

// ObservePools adds f to the observers of pool events. f runs on the
// goroutine that caused the event; it must not block.
func (e *Engine) ObservePools(f func(PoolEvent)) {
	e.pools.mu.Lock()
	defer e.pools.mu.Unlock()
	e.pools.observers = append(e.pools.observers, f)
}

// PoolsStatus describes the warm pools.
type PoolsStatus struct {
	// Size is the configured size of each pool; 0: pools are off.
	Size  int         `json:"size"`
	Pools []PoolStats `json:"pools"`
	// Reason says why there are no pools although Size is set.
	Reason string `json:"reason,omitempty"`
}

// Pools describes the warm pools.
func (e *Engine) Pools() PoolsStatus {
	return PoolsStatus{Size: e.opts.Pools.Size, Pools: e.pools.stats(), Reason: e.pools.reason()}
}

func (ps *pools) reason() string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.why
}

// stats describe every pool, sorted by backend and language.
func (ps *pools) stats() []PoolStats {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]PoolStats, 0, len(ps.byKey))
	for _, p := range ps.byKey {
		st := p.stats
		st.Ready, st.Filling, st.IdleMemory = len(p.ready), p.filling, 0
		for _, w := range p.ready {
			st.IdleMemory += w.mem
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Backend != out[j].Backend {
			return out[i].Backend < out[j].Backend
		}
		return out[i].Template < out[j].Template
	})
	return out
}

func (ps *pools) notify(p *pool, event string, took time.Duration) {
	ps.mu.Lock()
	obs, ready := ps.observers, len(p.ready)
	ps.mu.Unlock()
	for _, f := range obs {
		f(PoolEvent{Backend: p.key.backend, Template: p.key.template, Event: event, Ready: ready, Took: took})
	}
}

// poke wakes the fill loop.
func (ps *pools) poke() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// loop fills the pools until Close: at once when a sandbox is taken, lost
// or made, and every second (retries after failures, MaxAge).
func (ps *pools) loop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ps.plan()
		select {
		case <-stop:
			return
		case <-ps.wake:
		case <-t.C:
			ps.expire()
		}
	}
}

// poolWant is a pool the configuration asks for: its backend and template.
type poolWant struct {
	b    sandbox.Backend
	tmpl PoolTemplate
}

// wanted are the pools the configuration asks for now: their backends
// resolved (the default one may change as health changes).
func (ps *pools) wanted() map[poolKey]poolWant {
	out := map[poolKey]poolWant{}
	ps.mu.Lock()
	templates := ps.templates
	ps.mu.Unlock()
	if len(templates) == 0 {
		return out
	}
	names := ps.opts.Backends
	if len(names) == 0 {
		ctx, cancel := context.WithTimeout(ps.ctx, 30*time.Second)
		b, _, err := ps.e.Select(ctx, sandbox.Selection{})
		cancel()
		ps.mu.Lock()
		ps.why = ""
		if err != nil {
			ps.why = "no pools: the default backend: " + err.Error()
		}
		ps.mu.Unlock()
		if err != nil {
			return out
		}
		names = []string{b.Name()}
	}
	for _, name := range names {
		b, ok := ps.e.backends[name]
		if !ok {
			continue
		}
		for _, t := range templates {
			out[poolKey{name, t.Name}] = poolWant{b, t}
		}
	}
	return out
}

// plan drops the pools no longer wanted and starts the fills the others
// need, within Refill and MaxIdleMemory.
func (ps *pools) plan() {
	want := ps.wanted()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return
	}
	for k, p := range ps.byKey {
		if _, ok := want[k]; !ok {
			ps.dropLocked(p.ready...)
			p.ready = nil
			if p.filling == 0 {
				delete(ps.byKey, k)
			}
		}
	}
	now := time.Now()
	keys := make([]poolKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].backend+"\x00"+keys[i].template < keys[j].backend+"\x00"+keys[j].template
	})
	// Round-robin, one fill per pool a round, so that no pool starves
	// another of the refill slots.
	for more := true; more && ps.filling < ps.opts.Refill; {
		more = false
		for _, k := range keys {
			if ps.filling >= ps.opts.Refill {
				break
			}
			p := ps.byKey[k]
			if p == nil || (p.args == nil && !now.Before(p.retry)) {
				var err error
				if p, err = ps.newPool(k, want[k]); err != nil {
					// Shown in the stats; tried again in a minute.
					p = &pool{key: k, b: want[k].b, retry: now.Add(time.Minute)}
					p.stats = PoolStats{Backend: k.backend, Template: k.template, Size: ps.opts.Size, Error: err.Error()}
				}
				ps.byKey[k] = p
			}
			if p.args == nil || len(p.ready)+p.filling >= ps.opts.Size || now.Before(p.retry) {
				continue
			}
			if ps.idleMemoryLocked()+ps.costLocked(p) > ps.opts.MaxIdleMemory {
				continue
			}
			p.filling++
			ps.filling++
			more = true
			ps.wg.Go(func() { ps.fill(p) })
		}
	}
}

// newPool is the pool of k: w's template under the configured policy and
// limits. The pooled sandboxes' wall limit is the pool's own, beyond
// max_limits: it covers the wait in the pool (MaxAge) and then the longest
// call; each call's timeout is what bounds the program.
func (ps *pools) newPool(k poolKey, w poolWant) (*pool, error) {
	tmpl := w.tmpl.Spec
	tmpl.Limits.Wall = 0
	spec, _, err := ps.e.checkSpec(tmpl)
	if err == nil {
		err = ps.e.fits(w.b, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("the pooled sandboxes' spec: %w", err)
	}
	spec.Limits.Wall = ps.opts.MaxAge + w.tmpl.MaxCall + poolMargin
	if tmpl.Limits.CPUTime == 0 && ps.e.opts.Defaults.CPUTime == 0 {
		// As a call of the longest timeout gets it.
		spec.Limits.CPUTime = min(w.tmpl.MaxCall+2*time.Second, ps.e.opts.Max.CPUTime)
	}
	if err := spec.Validate(); err != nil { // the wall, changed past its maximum
		return nil, fmt.Errorf("the pooled sandboxes' spec: %w", err)
	}
	return &pool{key: k, b: w.b, tmpl: tmpl, spec: spec, args: slices.Clone(w.tmpl.Args),
		stats: PoolStats{Backend: k.backend, Template: k.template, Size: ps.opts.Size}}, nil
}

// idleMemoryLocked is what every ready sandbox holds, and what those being
// made are expected to.
func (ps *pools) idleMemoryLocked() int64 {
	var n int64
	for _, p := range ps.byKey {
		for _, w := range p.ready {
			n += w.mem
		}
		if p.filling > 0 {
			n += int64(p.filling) * ps.costLocked(p)
		}
	}
	return n
}

// costLocked is what one more sandbox of p is expected to hold: the most a
// ready one of p holds, else its memory limit.
func (ps *pools) costLocked(p *pool) int64 {
	var most int64
	for _, w := range p.ready {
		most = max(most, w.mem)
	}
	if most == 0 {
		return p.spec.Limits.Memory
	}
	return most
}

// fill makes one sandbox of p and starts its runner.
func (ps *pools) fill(p *pool) {
	start := time.Now()
	w, err := ps.start(p)
	took := time.Since(start)
	ps.mu.Lock()
	p.filling--
	ps.filling--
	closed := ps.closed
	if err == nil && !closed {
		p.ready = append(p.ready, w)
		p.stats.Made++
		p.stats.LastRefill = took
	} else if err != nil {
		p.stats.Failed++
		p.stats.Error = err.Error()
		p.backOffLocked()
	}
	ps.mu.Unlock()
	switch {
	case err != nil:
		ps.e.opts.Logger.Warn("warm pool: making a sandbox failed", "backend", p.key.backend, "template", p.key.template, "err", err)
		ps.notify(p, PoolFailed, took)
	case closed:
		w.close()
		return
	default:
		ps.notify(p, PoolMade, took)
		ps.wg.Go(func() { ps.watch(p, w) })
	}
	ps.poke()
}

// backOffLocked delays p's next fill after a failure or a lost sandbox:
// 1 s, doubling to 30 s, until a call takes one of its sandboxes (a
// runner that cannot start, e.g. an image without node, is not made
// again and again).
func (p *pool) backOffLocked() {
	p.backoff = min(max(2*p.backoff, time.Second), 30*time.Second)
	p.retry = time.Now().Add(p.backoff)
}

// start creates a sandbox of p and starts the runner in it, reading its
// stdin from a pipe that a call writes.
func (ps *pools) start(p *pool) (*warm, error) {
	sb, err := p.b.Create(ps.ctx, p.spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	w := &warm{sb: sb, born: time.Now(), wall: p.spec.Limits.Wall, pr: pr, pw: pw, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.res, w.err = sb.Exec(ctx, &sandbox.Process{Args: p.args, Stdin: pr})
		// A call still writing gets an error instead of blocking.
		pr.CloseWithError(io.ErrClosedPipe)
	}()
	w.mem = p.spec.Limits.Memory
	w.measure()
	return w, nil
}

// measure sets w.mem to what w's sandbox holds now, where it can say; its
// runner is still starting at first, so the pools measure again every
// second (expire).
func (w *warm) measure() {
	if m, ok := w.sb.(sandbox.Meter); ok {
		if n, err := m.Memory(); err == nil && n > 0 {
			w.mem = n
		}
	}
}

// watch drops w when its runner ends before a call takes it.
func (ps *pools) watch(p *pool, w *warm) {
	<-w.done
	ps.mu.Lock()
	lost := !w.taken
	why := ""
	if lost {
		// No call took it: its result is no one else's to change.
		why = "no result"
		if w.err != nil {
			why = w.err.Error()
		} else if w.res != nil {
			why = strings.TrimSpace(fmt.Sprintf("%s (exit %d) %s %s", w.res.Reason, w.res.ExitCode, w.res.Message, sandbox.LastLine(w.res.Stderr)))
		}
		w.taken = true
		p.ready = slices.DeleteFunc(p.ready, func(x *warm) bool { return x == w })
		p.stats.Lost++
		p.stats.Error = "a ready sandbox's runner ended: " + why
		p.backOffLocked()
	}
	ps.mu.Unlock()
	if lost {
		ps.e.opts.Logger.Warn("warm pool: a ready sandbox ended before a call took it", "backend", p.key.backend, "template", p.key.template, "why", why)
		w.close()
		ps.notify(p, PoolLost, 0)
		ps.poke()
	}
}

// expire replaces the sandboxes that waited MaxAge, and measures the
// others again.
func (ps *pools) expire() {
	var old []*pool
	ps.mu.Lock()
	for _, p := range ps.byKey {
		for _, w := range p.ready {
			w.measure()
		}
		n := 0
		for _, w := range p.ready {
			if time.Since(w.born) < ps.opts.MaxAge {
				break
			}
			n++
		}
		if n > 0 {
			ps.dropLocked(p.ready[:n]...)
			p.ready = slices.Delete(p.ready, 0, n)
			old = append(old, p)
		}
	}
	ps.mu.Unlock()
	for _, p := range old {
		ps.notify(p, PoolExpired, 0)
	}
}

// dropLocked closes ws in the background; they are no longer in a pool.
func (ps *pools) dropLocked(ws ...*warm) {
	for _, w := range ws {
		w.taken = true
		ps.wg.Go(w.close)
	}
}

// close ends the runner and closes the sandbox.
func (w *warm) close() {
	w.cancel()
	w.pw.CloseWithError(io.ErrClosedPipe)
	<-w.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.sb.Close(ctx)
}

// take returns a ready sandbox of the pool that serves a call of spec and
// p on backend b, with at least timeout left before its wall limit; nil
// when there is no such pool, or it has none ready (a miss).
func (ps *pools) take(b string, spec sandbox.Spec, p *sandbox.Process, timeout time.Duration) (*pool, *warm) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var pl *pool
	for k, c := range ps.byKey {
		if k.backend == b && c.args != nil && slices.Equal(c.args, p.Args) && c.serves(spec, p) {
			pl = c
			break
		}
	}
	if pl == nil {
		return nil, nil
	}
	for len(pl.ready) > 0 {
		w := pl.ready[0]
		pl.ready = pl.ready[1:]
		w.taken = true
		if time.Since(w.born)+timeout+poolMargin/2 < w.wall {
			// The fill that replaces it starts when the call has ended
			// (call), so that it does not take the call's CPU.
			pl.stats.Hits++
			pl.stats.Error, pl.backoff = "", 0
			return pl, w
		}
		ps.wg.Go(w.close) // too close to its wall limit for this call
	}
	pl.stats.Misses++
	ps.poke()
	return pl, nil
}

// serves says whether a call of spec and p is one the pool's sandboxes
// are made for: the template's, but for the wall.
func (p *pool) serves(spec sandbox.Spec, proc *sandbox.Process) bool {
	l := spec.Limits
	l.Wall = 0
	return l == p.tmpl.Limits && spec.Files == nil && spec.Env == nil && spec.Image == "" && spec.Scope == "" &&
		spec.Labels == nil && reflect.DeepEqual(spec.Policy, sandbox.Policy{}) &&
		proc.Env == nil && proc.Dir == "" && proc.Stdout == nil && proc.Stderr == nil
}

// call hands in to w's runner and returns its result: the runner is killed
// at timeout (Reason timeout) or when ctx ends (canceled). Every process of
// the sandbox has ended when call returns; the rest of the sandbox is
// removed in the background (close).
func (w *warm) call(ctx context.Context, in []byte, timeout time.Duration) (*sandbox.Result, error) {
	start := time.Now()
	go func() {
		if _, err := w.pw.Write(in); err == nil {
			w.pw.Close()
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	timedOut := false
	select {
	case <-w.done:
	case <-t.C:
		timedOut = true
		w.cancel()
		<-w.done
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	if w.err != nil {
		return nil, w.err
	}
	res := w.res
	if timedOut && res.Reason == sandbox.ReasonCanceled {
		res.Reason = sandbox.ReasonTimeout
		res.Message = fmt.Sprintf("the wall-clock limit of %v was reached; the process tree was killed", timeout)
	}
	// The call's time, not the time the runner waited in the pool.
	res.Usage.Wall = time.Since(start)
	return res, nil
}

// call runs a call of spec and p on backend b in a warm sandbox,
// when a pool serves it and has one ready; ok is false otherwise (the
// caller starts a cold one).
func (ps *pools) call(ctx context.Context, b string, spec sandbox.Spec, p *sandbox.Process) (res *sandbox.Result, ok bool, err error) {
	if ps.opts.Size == 0 || p.Stdin == nil {
		return nil, false, nil
	}
	timeout := p.WallLimit(spec.Limits.WithDefaults(ps.e.opts.Defaults))
	pl, w := ps.take(b, spec, p, timeout)
	if w == nil {
		if pl != nil {
			ps.notify(pl, PoolMiss, 0)
		}
		return nil, false, nil
	}
	in, err := io.ReadAll(p.Stdin)
	if err != nil {
		ps.wg.Go(w.close)
		return nil, true, sandbox.Errorf(sandbox.ErrInternal, "stdin_failed", "reading the call: %w", err)
	}
	start := time.Now()
	res, err = w.call(ctx, in, timeout)
	ps.wg.Go(w.close)
	ps.notify(pl, PoolHit, time.Since(start))
	ps.poke()
	return res, true, err
}

// close closes every ready sandbox and waits for the fills under way.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	for _, p := range ps.byKey {
		ps.dropLocked(p.ready...)
		p.ready = nil
	}
	ps.mu.Unlock()
	ps.stop()
	ps.wg.Wait()
}
