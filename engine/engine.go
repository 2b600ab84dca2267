package engine

import (
	"context"

	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Options configure an Engine.
type Options struct {
	// Backend is "auto", "off" or a backend name.
	Backend string
	// AllowUnisolated lets the "local" backend run when it is named.
	AllowUnisolated bool
	// MinIsolation is the floor every request gets. auto and tiers never
	// pick an unisolated backend whatever it is.
	MinIsolation sandbox.Isolation
	// Preference breaks ties within an isolation level; also the order
	// "fast" tries backends in.
	Preference []string
	// Defaults are the limits a request gets for fields it leaves zero.
	Defaults sandbox.Limits
	// MaxWall caps any request's wall-clock limit (0: no cap beyond Defaults.Wall's type).
	MaxWall time.Duration
	// Backends restricts the registered backends built (nil: all).
	Backends []string
	// Settings returns the settings for a backend's factory.
	Settings func(name string) sandbox.Settings
	// ProbeInterval is how often health is refreshed (default 30s).
	ProbeInterval time.Duration
	Logger        *slog.Logger
}

// Selection is what a request says about where it may run.
type Selection struct {
	Backend      string `json:"backend,omitempty"`       // a backend name, or "" for the configured choice
	Tier         string `json:"tier,omitempty"`          // strict | standard | fast
	MinIsolation string `json:"min_isolation,omitempty"` // none | process | kernel | vm
}

// Engine owns the backends and runs requests on them.
type Engine struct {
	opts     Options
	backends map[string]sandbox.Backend
	order    []string // registered names, sorted

	mu     sync.Mutex
	health map[string]*probe
	stop   chan struct{}
	wg     sync.WaitGroup
}

type probe struct {
	done chan struct{} // closed once the first probe finished
	h    sandbox.Health
}

// New builds every registered backend. A factory error makes that backend
// unavailable with the reason; it does not fail the engine.
func New(o Options) (*Engine, error) {
	if o.Backend == "" {
		o.Backend = "auto"
	}
	if o.Preference == nil {
		o.Preference = []string{"native", "bwrap", "docker"}
	}
	if o.Defaults == (sandbox.Limits{}) {
		o.Defaults = sandbox.Defaults
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: o, backends: map[string]sandbox.Backend{}, health: map[string]*probe{}, stop: make(chan struct{})}
	names := sandbox.Names()
	if o.Backends != nil {
		names = slices.DeleteFunc(slices.Clone(o.Backends), func(n string) bool { _, ok := sandbox.Lookup(n); return !ok })
	}
	for _, name := range names {
		f, _ := sandbox.Lookup(name)
		s := sandbox.Settings{Decode: func(any) error { return nil }, Defaults: o.Defaults}
		if o.Settings != nil {
			s = o.Settings(name)
		}
		b, err := f(s)
		if err != nil {
			p := &probe{done: make(chan struct{}), h: sandbox.Health{Reason: "creating backend: " + err.Error(), CheckedAt: time.Now()}}
			close(p.done)
			e.health[name] = p
			e.order = append(e.order, name)
			continue
		}
		e.backends[name] = b
		e.order = append(e.order, name)
	}
	sort.Strings(e.order)
	switch o.Backend {
	case "auto", "off":
	default:
		if _, ok := sandbox.Lookup(o.Backend); !ok {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "backend_unknown", "configured backend %q is not known (known: auto, off, %s)", o.Backend, strings.Join(e.order, ", "))
		}
	}
	return e, nil
}

// Start probes every backend now and then every ProbeInterval until Close.
func (e *Engine) Start() {
	for _, name := range e.order {
		e.probeAsync(name)
	}
	e.wg.Go(func() {
		t := time.NewTicker(e.opts.ProbeInterval)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
				for _, name := range e.order {
					e.refresh(name)
				}
			}
		}
	})
}

// Close stops the background prober and closes every backend that holds
// resources of its own (an optional `Close() error`, e.g. docker's reused
// containers).
func (e *Engine) Close() {
	e.mu.Lock()
	select {
	case <-e.stop:
		e.mu.Unlock()
		return
	default:
		close(e.stop)
	}
	e.mu.Unlock()
	e.wg.Wait()
	for _, name := range e.order {
		if c, ok := e.backends[name].(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				e.opts.Logger.Warn("closing backend", "backend", name, "err", err)
			}
		}
	}
}

// probeAsync starts the first probe of name unless one exists.
func (e *Engine) probeAsync(name string) *probe {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.health[name]; ok {
		return p
	}
	p := &probe{done: make(chan struct{})}
	e.health[name] = p
	b := e.backends[name]
	e.wg.Go(func() {
		h := e.check(b)
		e.mu.Lock()
		p.h = h
		e.mu.Unlock()
		close(p.done)
	})
	return p
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

func (e *Engine) check(b sandbox.Backend) sandbox.Health {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := b.Health(ctx)
	if h.CheckedAt.IsZero() {
		h.CheckedAt = time.Now()
	}
	e.opts.Logger.Debug("probed backend", "backend", b.Name(), "available", h.Available, "ready", h.Ready, "reason", h.Reason)
	return h
}

// healthOf returns name's health, waiting for its first probe if needed.
func (e *Engine) healthOf(ctx context.Context, name string) (sandbox.Health, error) {
	p := e.probeAsync(name)
	select {
	case <-p.done:
	case <-ctx.Done():
		return sandbox.Health{}, sandbox.Errorf(sandbox.ErrUnavailable, "interrupted", "waiting for the health probe of %s: %w", name, ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return p.h, nil
}

// Backend returns a built backend by name.
func (e *Engine) Backend(name string) (sandbox.Backend, bool) {
	b, ok := e.backends[name]
	return b, ok
}

// Names lists the backends the engine knows, sorted.
func (e *Engine) Names() []string { return slices.Clone(e.order) }

// Limits applies the configured defaults and maxima to requested limits.
func (e *Engine) Limits(l sandbox.Limits) (sandbox.Limits, error) {
	if err := l.Validate(); err != nil {
		return l, err
	}
	if e.opts.MaxWall > 0 && l.Wall > e.opts.MaxWall {
		return l, sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "limits.wall %s exceeds the maximum %s", l.Wall, e.opts.MaxWall)
	}
	return l.WithDefaults(e.opts.Defaults), nil
}

// Run selects a backend for sel and runs p in a one-shot sandbox.
func (e *Engine) Run(ctx context.Context, sel Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	b, _, err := e.Select(ctx, sel)
	if err != nil {
		return nil, err
	}
	if spec.Limits, err = e.Limits(spec.Limits); err != nil {
		return nil, err
	}
	return sandbox.Run(ctx, b, spec, p)
}

// Create selects a backend for sel and creates a sandbox on it (sessions).
func (e *Engine) Create(ctx context.Context, sel Selection, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b, _, err := e.Select(ctx, sel)
	if err != nil {
		return nil, err
	}
	if spec.Limits, err = e.Limits(spec.Limits); err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return b.Create(ctx, spec)
}

func errorf(kind *sandbox.Kind, code, format string, args ...any) error {
	return sandbox.Errorf(kind, code, format, args...)
}
