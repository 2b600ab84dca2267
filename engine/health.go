package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// How long a probe's answer in the health cache file stays good. A ready
// backend is trusted longer than a failing one, so a fix (runsc installed,
// a daemon started) is seen soon.
const (
	cacheReadyTTL    = 10 * time.Minute
	cacheNotReadyTTL = 30 * time.Second
)

// Fingerprinter is a backend whose health depends on more than its
// configuration — the binaries it runs, a daemon's address. The health
// cache keeps an answer only while the fingerprint is unchanged.
type Fingerprinter interface {
	Fingerprint() string
}

// probe is the health of one backend: being found out (done open), or
// known.
type probe struct {
	done chan struct{} // closed once the first probe finished
	h    sandbox.Health
}

// probeAsync starts the first probe of name unless one exists; with
// reconcile, the backend first removes what a crashed execbox left (the
// daemon's start; a one-shot CLI run leaves that to the backend's own first
// use).
func (e *Engine) probeAsync(name string, reconcile bool) *probe {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.health[name]; ok {
		return p
	}
	p := &probe{done: make(chan struct{})}
	e.health[name] = p
	b := e.backends[name]
	e.wg.Go(func() {
		if reconcile {
			e.reconcile(b)
		}
		h := e.check(b)
		e.mu.Lock()
		p.h = h
		e.mu.Unlock()
		close(p.done)
	})
	return p
}

// reconcile removes what a crashed execbox left of backend b, once, before
// its first probe.
func (e *Engine) reconcile(b sandbox.Backend) {
	r, ok := b.(sandbox.Reconciler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	removed, err := r.Reconcile(ctx)
	if len(removed) > 0 {
		e.opts.Logger.Info("removed what an earlier execbox left", "backend", b.Name(), "removed", removed)
	}
	if err != nil {
		e.opts.Logger.Warn("reconciling backend", "backend", b.Name(), "err", err)
	}
}

// ProbeAll probes every backend now, in parallel, whatever is known or
// cached (doctor), and waits for the answers; they update the cache.
// progress, when not nil, is called as each answer comes in (one call at
// a time), with how long the probe took.
func (e *Engine) ProbeAll(ctx context.Context, progress func(name string, h sandbox.Health, took time.Duration)) {
	var wg sync.WaitGroup
	var progressMu sync.Mutex
	for _, name := range e.order {
		b, ok := e.backends[name]
		if !ok {
			continue
		}
		wg.Go(func() {
			start := time.Now()
			h := e.check(b)
			p := &probe{done: make(chan struct{}), h: h}
			close(p.done)
			e.mu.Lock()
			e.health[name] = p
			e.mu.Unlock()
			if progress != nil {
				progressMu.Lock()
				progress(name, h, time.Since(start))
				progressMu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (e *Engine) refresh(name string) {
	b, ok := e.backends[name]
	if !ok {
		return
	}
	h := e.check(b)
	e.mu.Lock()
	if p := e.health[name]; p != nil {
		p.h = h
	}
	e.mu.Unlock()
}

// probeTimeout bounds one health probe: a microVM under software
// emulation boots several times over in one (the probe's sandboxes).
const probeTimeout = 3 * time.Minute

// check probes b and writes the answer to the health cache. Close ends a
// probe that still runs.
func (e *Engine) check(b sandbox.Backend) sandbox.Health {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	h := b.Health(ctx)
	if h.CheckedAt.IsZero() {
		h.CheckedAt = time.Now()
	}
	if c, ok := b.(sandbox.Capacitor); ok && h.Available && b.Capabilities().Remote {
		if capacity, err := c.Capacity(ctx); err != nil {
			e.opts.Logger.Warn("asking a backend its capacity", "backend", b.Name(), "err", err)
		} else {
			e.gate.setCapacity(b.Name(), capacity)
		}
	}
	e.opts.Logger.Debug("probed backend", "backend", b.Name(), "available", h.Available, "ready", h.Ready, "reason", h.Reason)
	if ctx.Err() == nil {
		e.cacheStore(b.Name(), h)
	}
	return h
}

// healthOf returns name's health: known in this process, else from the
// health cache file, else probed now (the caller waits; ctx ends the
// wait).
func (e *Engine) healthOf(ctx context.Context, name string) (sandbox.Health, error) {
	if h, ok := e.knownHealth(name); ok {
		return h, nil
	}
	p := e.probeAsync(name, false)
	select {
	case <-p.done:
	case <-ctx.Done():
		return sandbox.Health{}, sandbox.Errorf(sandbox.ErrUnavailable, "interrupted", "waiting for the health probe of %s: %w", name, ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return p.h, nil
}

// knownHealth returns name's health when it is known without probing: a
// finished probe of this process, or a fresh answer in the cache file,
// which then counts as this process's.
func (e *Engine) knownHealth(name string) (sandbox.Health, bool) {
	e.mu.Lock()
	if p, ok := e.health[name]; ok {
		select {
		case <-p.done:
			h := p.h
			e.mu.Unlock()
			return h, true
		default:
			e.mu.Unlock()
			return sandbox.Health{}, false
		}
	}
	e.mu.Unlock()
	h, ok := e.cacheLoad(name)
	if !ok {
		return sandbox.Health{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, raced := e.health[name]; !raced {
		p := &probe{done: make(chan struct{}), h: h}
		close(p.done)
		e.health[name] = p
	}
	return h, true
}

// cacheEntry is one backend's answer in the health cache file.
type cacheEntry struct {
	Fingerprint string         `json:"fingerprint"`
	Health      sandbox.Health `json:"health"`
}

// cacheLoad returns name's cached health if the cache holds a fresh answer
// for the backend as it is now.
func (e *Engine) cacheLoad(name string) (sandbox.Health, bool) {
	if e.opts.HealthCache == "" {
		return sandbox.Health{}, false
	}
	entries := readCache(e.opts.HealthCache)
	c, ok := entries[name]
	if !ok || c.Fingerprint != e.fingerprint(name) {
		return sandbox.Health{}, false
	}
	ttl := cacheNotReadyTTL
	if c.Health.Ready {
		ttl = cacheReadyTTL
	}
	if age := time.Since(c.Health.CheckedAt); age < 0 || age > ttl {
		return sandbox.Health{}, false
	}
	return c.Health, true
}

// cacheStore records name's health in the cache file: read, change one
// entry, write a new file and rename it over the old one, so a reader
// never sees half a file. Within a process the updates take turns; two
// processes writing at once lose one answer, which only costs a probe.
func (e *Engine) cacheStore(name string, h sandbox.Health) {
	if e.opts.HealthCache == "" {
		return
	}
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	entries := readCache(e.opts.HealthCache)
	entries[name] = cacheEntry{Fingerprint: e.fingerprint(name), Health: h}
	e.cacheStoreEntries(entries)
}

// cacheStoreEntries writes the whole cache file.
func (e *Engine) cacheStoreEntries(entries map[string]cacheEntry) {
	data, err := json.Marshal(entries)
	if err != nil {
		return
	}
	dir := filepath.Dir(e.opts.HealthCache)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.opts.Logger.Debug("writing the health cache", "err", err)
		return
	}
	f, err := os.CreateTemp(dir, ".health-*")
	if err != nil {
		e.opts.Logger.Debug("writing the health cache", "err", err)
		return
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), e.opts.HealthCache) != nil {
		os.Remove(f.Name())
	}
}

// maxCacheFile bounds what is read of the cache file.
const maxCacheFile = 1 << 20

// readCache reads the cache file; a missing, unreadable or foreign one is
// empty. A file not owned by this user, or writable by others, is ignored:
// it could claim a weak backend ready and a strong one not.
func readCache(path string) map[string]cacheEntry {
	out := map[string]cacheEntry{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxCacheFile || st.Mode().Perm()&0o022 != 0 || !ownedByMe(st) {
		return out
	}
	if err := json.NewDecoder(f).Decode(&out); err != nil {
		return map[string]cacheEntry{}
	}
	return out
}

// fingerprint is what name's cached health is valid for: this execbox
// binary, the kernel, the backend's configuration, and whatever else the
// backend names (Fingerprinter).
func (e *Engine) fingerprint(name string) string {
	h := sha256.New()
	if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(exe); err == nil {
			fmt.Fprintf(h, "exe %s %d %d\n", exe, st.Size(), st.ModTime().UnixNano())
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		fmt.Fprintf(h, "kernel %s\n", unix.ByteSliceToString(u.Release[:]))
	}
	fmt.Fprintf(h, "euid %d\n", os.Geteuid())
	if cfg, err := json.Marshal(e.configs[name]); err == nil {
		fmt.Fprintf(h, "config %s\n", cfg)
	}
	if f, ok := e.backends[name].(Fingerprinter); ok {
		fmt.Fprintf(h, "backend %s\n", f.Fingerprint())
	}
	return hex.EncodeToString(h.Sum(nil))
}
