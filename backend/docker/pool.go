package docker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// wipe empties a reused container between two sandboxes (the wrapper has
// already killed every process but the keeper): it removes everything in
// /work, /tmp and /dev/shm (chmod first, so that directories the program
// made unreadable go too; chmod -R never follows a symlink).
var wipe = []string{"/bin/sh", "-c", `for d in /work /tmp /dev/shm; do
	chmod -R u+rwx "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
	rm -rf "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
done
for d in /work /tmp /dev/shm; do
	for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
		if [ -e "$f" ] || [ -L "$f" ]; then echo "left: $f"; exit 1; fi
	done
done
exit 0`}

// lease returns an idle reused container for spec's scope, or starts one.
func (b *Backend) lease(ctx context.Context, spec sandbox.Spec) (*ctr, error) {
	key := poolKey(spec)
	b.mu.Lock()
	c := b.pool[key]
	delete(b.pool, key)
	b.mu.Unlock()
	if c != nil {
		c.stopIdle()
		if c.deadReason() == "" && !c.ch.gone() {
			return c, nil
		}
		b.retire(ctx, c)
	}
	c, err := b.startContainer(ctx, spec, sandbox.NewID(), spec.Scope)
	if err != nil {
		return nil, err
	}
	c.key = key
	return c, nil
}

// release wipes a reused container and keeps it for the next sandbox of its
// scope, with an idle timer; a container that cannot be wiped, or that is
// not needed because the scope already has an idle one, is removed.
func (b *Backend) release(ctx context.Context, c *ctr) error {
	if c.deadReason() == "" {
		code, out, err := b.quickRun(context.WithoutCancel(ctx), c, wipe, nil)
		if err != nil || code != 0 {
			c.kill("removed: wiping it between sandboxes failed: " + out)
		}
	}
	b.mu.Lock()
	_, full := b.pool[c.key]
	keep := c.deadReason() == "" && !full && !b.closed
	if keep {
		b.pool[c.key] = c
		c.mu.Lock()
		c.idle = time.AfterFunc(b.cfg.IdleTimeout, func() { b.reapIdle(c) })
		c.mu.Unlock()
	}
	b.mu.Unlock()
	if keep {
		return nil
	}
	return b.retire(ctx, c)
}

// reapIdle removes c if it is still idle in the pool.
func (b *Backend) reapIdle(c *ctr) {
	b.mu.Lock()
	if b.pool[c.key] != c {
		b.mu.Unlock()
		return
	}
	delete(b.pool, c.key)
	b.mu.Unlock()
	done := b.track()
	defer done()
	b.retire(context.Background(), c)
}

// maxWarmProfiles bounds the limits profiles that get containers started
// ahead; the least recently used one gives its containers up.
const maxWarmProfiles = 4

// warmPool keeps docker.pool_size containers started ahead for each of the
// most recently used profiles of one-shot sandboxes. A container in it
// has run nothing but its keeper; take hands it to exactly one sandbox and
// starts a replacement in the background. Idle ones are removed after
// docker.idle_timeout.
type warmPool struct {
	b      *Backend
	ctx    context.Context // ends at close: refills stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // refills in flight

	mu      sync.Mutex
	closed  bool
	idle    map[string][]*ctr
	filling map[string]bool
	timers  map[string]*time.Timer // refills due
	order   []string               // profile keys, least recently used first
}

func (w *warmPool) init(b *Backend) {
	w.b = b
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.idle, w.filling, w.timers = map[string][]*ctr{}, map[string]bool{}, map[string]*time.Timer{}
}

// take returns a started container for spec, or nil. The pool is
// refilled when the sandbox closes (replenish): after its result is out,
// not while its program runs.
func (w *warmPool) take(spec sandbox.Spec) *ctr {
	if w.b.cfg.PoolSize == 0 {
		return nil
	}
	key := poolKey(spec)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.touch(key)
	var c *ctr
	for len(w.idle[key]) > 0 && c == nil {
		q := w.idle[key]
		c, w.idle[key] = q[0], q[1:]
		c.stopIdle()
		if c.deadReason() != "" || c.ch.gone() {
			w.b.retireAsync(c)
			c = nil
		}
	}
	return c
}

// refillDelay is how long after a sandbox closed its profile's pool is
// refilled: long enough that a process that exits right after its run
// (the CLI) starts no container only to remove it, short next to a
// container's start.
const refillDelay = 50 * time.Millisecond

// replenish starts containers for spec's profile in the background, after
// refillDelay, until it has PoolSize idle ones; a one-shot sandbox calls
// it when it closes.
func (w *warmPool) replenish(spec sandbox.Spec) {
	if w.b.cfg.PoolSize == 0 {
		return
	}
	key := poolKey(spec)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.timers[key] != nil || !slices.Contains(w.order, key) {
		return
	}
	w.timers[key] = time.AfterFunc(refillDelay, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.timers, key)
		if !w.closed && slices.Contains(w.order, key) {
			w.refill(key, spec)
		}
	})
}

// touch makes key the most recently used profile, evicting the least
// recently used one past maxWarmProfiles. Called with w.mu held.
func (w *warmPool) touch(key string) {
	if i := slices.Index(w.order, key); i >= 0 {
		w.order = slices.Delete(w.order, i, i+1)
	}
	w.order = append(w.order, key)
	for len(w.order) > maxWarmProfiles {
		old := w.order[0]
		w.order = w.order[1:]
		for _, c := range w.idle[old] {
			c.stopIdle()
			w.b.retireAsync(c)
		}
		delete(w.idle, old)
	}
}

// refill starts containers for key in the background until it has
// PoolSize idle ones. Called with w.mu held.
func (w *warmPool) refill(key string, spec sandbox.Spec) {
	if w.filling[key] || len(w.idle[key]) >= w.b.cfg.PoolSize {
		return
	}
	w.filling[key] = true
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.filling, key)
			w.mu.Unlock()
		}()
		for {
			w.mu.Lock()
			need := !w.closed && slices.Contains(w.order, key) && len(w.idle[key]) < w.b.cfg.PoolSize
			w.mu.Unlock()
			if !need {
				return
			}
			c, err := w.b.startContainer(w.ctx, spec, sandbox.NewID(), "")
			if err != nil {
				return // the next take tries again
			}
			c.key = key
			w.mu.Lock()
			if w.closed || !slices.Contains(w.order, key) {
				w.mu.Unlock()
				w.b.retire(context.Background(), c)
				return
			}
			w.idle[key] = append(w.idle[key], c)
			c.mu.Lock()
			c.idle = time.AfterFunc(w.b.cfg.IdleTimeout, func() { w.expire(c) })
			c.mu.Unlock()
			w.mu.Unlock()
		}
	}()
}

// expire removes c if it is still idle in the pool.
func (w *warmPool) expire(c *ctr) {
	w.mu.Lock()
	q := w.idle[c.key]
	i := slices.Index(q, c)
	if i < 0 {
		w.mu.Unlock()
		return
	}
	w.idle[c.key] = slices.Delete(q, i, i+1)
	w.mu.Unlock()
	done := w.b.track()
	defer done()
	w.b.retire(context.Background(), c)
}

// close stops the refills and removes the idle containers.
func (w *warmPool) close() {
	w.mu.Lock()
	w.closed = true
	for _, t := range w.timers {
		t.Stop()
	}
	var all []*ctr
	for _, q := range w.idle {
		all = append(all, q...)
	}
	w.idle = map[string][]*ctr{}
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	for _, c := range all {
		c.stopIdle()
		w.b.retire(context.Background(), c)
	}
}

// size is the number of idle containers, for tests.
func (w *warmPool) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.idle {
		n += len(q)
	}
	return n
}
