package engine

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// Options configure an Engine.
type Options struct {
	// Backend is "auto", "off" or a backend name.
	Backend string
	// AllowUnisolated lets the "local" backend run when it is named.
	AllowUnisolated bool
	// AllowWeakLimits lets a backend run whose limits do not bound the
	// sandbox as a whole here (Capabilities.Weak: no cgroup, as for a
	// rootless execbox); without it such a backend is refused.
	AllowWeakLimits bool
	// MinIsolation is the floor every request gets. auto and tiers never
	// pick an unisolated backend whatever it is.
	MinIsolation sandbox.Isolation
	// Preference breaks ties within an isolation level; also the order
	// "fast" tries backends in.
	Preference []string
	// Defaults are the limits a request gets for fields it leaves zero.
	Defaults sandbox.Limits
	// Max are the largest limits a request may ask for, field by field; a
	// request over one is refused (ErrInvalid naming the field). Zero
	// fields take sandbox.HostMaxima()'s. Defaults must lie within them.
	Max sandbox.Limits
	// Backends restricts the registered backends built (nil: all).
	Backends []string
	// Settings returns the settings for a backend's factory.
	Settings func(name string) sandbox.Settings
	// ProbeInterval is how often health is refreshed (default 30s).
	ProbeInterval time.Duration
	Logger        *slog.Logger

	// Policy is the configured policy every sandbox gets, whoever asks:
	// its env allowlist is added to the Spec's, and its RunAsUser wins
	// when set. A request cannot relax it (see Spec.Policy).
	Policy sandbox.Policy
	// MaxRuns bounds the sandboxes of Run and Create alive at once, on
	// every backend together; one more waits in the queue, then is
	// refused with ErrBusy, code "busy". 0 bounds them by where they run:
	// the backends on this host by its cores (runtime.NumCPU()), a remote
	// one that says its capacity (sandbox.Capacitor, a cluster's quota) by
	// that. Function calls have their own bound (Functions.Concurrency),
	// so a burst of one kind cannot starve the other.
	MaxRuns int
	// HealthCache is a file where probe answers are kept between
	// processes (the CLI runs once per command); "" keeps none. Its
	// directory should be one only this user can write.
	HealthCache string
	// ReservedRuns of each lane's slots (AdmissionStats.Lanes) are taken
	// only by privileged owners (Admit), so that no other owner can lock
	// them out; at most the lane's slots − 1.
	ReservedRuns int
	// OwnerRuns is the most slots of a lane one unprivileged owner holds
	// at once; 0 means half of the lane's, at least 1.
	OwnerRuns int
	// ResultMemory bounds what the admitted runs' results may hold: each
	// reserves 2 × output + artifact_bytes of its limits (Limits.
	// ResultBytes) until it is released, and one that does not fit is
	// refused busy. 0 means sandbox.HostResultMemory().
	ResultMemory int64
	// QueueDepth runs may wait for admission, each at most QueueWait,
	// before one is refused busy; 0 (either) refuses at once.
	QueueDepth int
	QueueWait  time.Duration
	// AdmissionObserver, when set, is told of every run that waited in
	// the queue or was admitted: how long it waited and whether it got in.
	AdmissionObserver func(waited time.Duration, admitted bool)
	// Sessions bound the sessions (OpenSession).
	Sessions SessionOptions
	// Pools configure the warm pools (none unless Pools.Size is set and
	// Pool names what to make).
	Pools PoolOptions
	// Retries say how executions are tried again after an infrastructure
	// fault.
	Retries RetryOptions
	// Events is the bus the engine publishes its events on (Events); nil
	// makes one.
	Events *event.Bus
	// Images are the images a request may name (Spec.Image), on a backend
	// that has images; a request naming another is refused before it runs.
	// The backends' configured images need no listing.
	Images []string
	// Roots resolves an image of execbox's store (Spec.Image) into its
	// unpacked root, or fails ErrNotFound when the store has none of that
	// name; nil means there is no store. An image of the store needs no
	// listing in Images: pulling it was the operator's choice.
	Roots func(ref string) (*sandbox.RootImage, error)
	// Configured names the settings the configuration set rather than
	// execbox's built-in defaults: limit names ("memory", as in JSON) and
	// "backend". A run's Result.Sources says "config" for them.
	Configured map[string]bool
}

// Engine owns the backends and runs requests on them.
type Engine struct {
	opts     Options
	backends map[string]sandbox.Backend
	configs  map[string]any // each backend's configuration section, for the health cache
	order    []string       // registered names, sorted

	gate     *gate
	sessions sessions
	pools    *pools
	events   *event.Bus

	mu     sync.Mutex
	health map[string]*probe
	// cacheMu makes this process's updates of the health cache file one
	// at a time: probes run side by side (ProbeAll), and each rewrites
	// the whole file.
	cacheMu sync.Mutex
	stop    chan struct{}
	wg      sync.WaitGroup
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
	if o.MaxRuns < 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "max_runs %d: must not be negative", o.MaxRuns)
	}
	if o.ReservedRuns < 0 || o.OwnerRuns < 0 || o.ResultMemory < 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "reserved runs, owner runs and result memory must not be negative")
	}
	if o.ResultMemory == 0 {
		o.ResultMemory = sandbox.HostResultMemory()
	}
	o.Sessions = o.Sessions.withDefaults()
	if err := o.Sessions.validate(); err != nil {
		return nil, err
	}
	o.Pools = o.Pools.withDefaults()
	if err := o.Pools.validate(); err != nil {
		return nil, err
	}
	o.Max = o.Max.WithDefaults(sandbox.HostMaxima())
	if err := o.Max.Validate(); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "the maxima: %w", err)
	}
	if err := o.Defaults.Within(o.Max); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "the default limits: %w", err)
	}
	if err := o.Retries.validate(); err != nil {
		return nil, err
	}
	o.Retries = o.Retries.withDefaults()
	if o.Events == nil {
		o.Events = &event.Bus{}
	}
	e := &Engine{opts: o, events: o.Events, sessions: sessions{bus: o.Events}, backends: map[string]sandbox.Backend{}, health: map[string]*probe{}, configs: map[string]any{}, stop: make(chan struct{}),
		gate: newGate(o.MaxRuns, o.ReservedRuns, o.OwnerRuns, o.ResultMemory, o.QueueDepth, o.QueueWait, o.AdmissionObserver)}
	e.pools = newPools(e, o.Pools)
	names := sandbox.Names()
	if o.Backends != nil {
		names = slices.DeleteFunc(slices.Clone(o.Backends), func(n string) bool { _, ok := sandbox.Lookup(n); return !ok })
	}
	for _, name := range names {
		r, _ := sandbox.Lookup(name)
		s := sandbox.Settings{Defaults: o.Defaults}
		if o.Settings != nil {
			s = o.Settings(name)
		}
		e.configs[name] = s.Config
		b, err := r.New(s)
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
	for _, name := range o.Pools.Backends {
		if _, ok := sandbox.Lookup(name); !ok {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "pools.backends: %q is not a known backend (known: %s)", name, strings.Join(e.order, ", "))
		}
	}
	switch o.Backend {
	case "auto", "off":
	default:
		if _, ok := sandbox.Lookup(o.Backend); !ok {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "backend_unknown", "configured backend %q is not known (known: auto, off, %s)", o.Backend, strings.Join(e.order, ", "))
		}
	}
	return e, nil
}

// Start reconciles every backend that can (removing what a crashed execbox
// left), probes each now, then reconciles and probes each every
// ProbeInterval until Close, closes
// expired and idle sessions every Sessions.ReapInterval, and fills the warm
// pools.
func (e *Engine) Start() {
	for _, name := range e.order {
		e.probeAsync(name, true)
	}
	e.wg.Go(e.reaper)
	if e.opts.Pools.Size > 0 {
		e.wg.Go(func() { e.pools.loop(e.stop) })
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
					// Again, not only at start: a request a killed execbox
					// sent (a container create) may complete after the
					// first reconcile ran.
					if b, ok := e.backends[name]; ok {
						e.reconcile(b)
					}
					e.refresh(name)
				}
			}
		}
	})
}

// Close stops the background prober, the session reaper and the pools'
// fill loop, closes every pooled sandbox and every open session, then every
// backend that holds resources of its own (an
// optional `Close() error`, e.g. docker's reused containers).
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
	e.pools.close()
	e.closeSessions()
	// Side by side: each removes what it made (directories, cgroups).
	var wg sync.WaitGroup
	for _, name := range e.order {
		if c, ok := e.backends[name].(sandbox.Closer); ok {
			wg.Go(func() {
				if err := c.Close(); err != nil {
					e.opts.Logger.Warn("closing backend", "backend", name, "err", err)
				}
			})
		}
	}
	wg.Wait()
}

// Backend returns a built backend by name.
func (e *Engine) Backend(name string) (sandbox.Backend, bool) {
	b, ok := e.backends[name]
	return b, ok
}

// Names lists the backends the engine knows, sorted.
func (e *Engine) Names() []string { return slices.Clone(e.order) }

// Limits applies the configured defaults and maxima to requested limits:
// a value beyond the contract's bounds, or a field over its maximum, is
// ErrInvalid naming the field ("limits.memory 3g exceeds the maximum 1g
// (max_limits.memory)"); zero fields take the defaults. A CPU time derived
// from the wall is kept within its maximum.
func (e *Engine) Limits(l sandbox.Limits) (sandbox.Limits, error) {
	if err := l.Validate(); err != nil {
		return l, err
	}
	return e.fill(l)
}

// fill is Limits of limits already valid (checkSpec validates them with
// the rest of the spec): the maxima checked, the defaults filled in.
func (e *Engine) fill(l sandbox.Limits) (sandbox.Limits, error) {
	if err := l.Within(e.opts.Max); err != nil {
		return l, err
	}
	out := l.WithDefaults(e.opts.Defaults)
	if l.CPUTime == 0 && e.opts.Defaults.CPUTime == 0 {
		out.CPUTime = min(out.CPUTime, e.opts.Max.CPUTime)
	}
	return out, nil
}

// Maxima are the configured maxima, every field set.
func (e *Engine) Maxima() sandbox.Limits { return e.opts.Max }

// Run selects a backend for sel and runs p in a one-shot sandbox under the
// configured policy, holding a run slot and its result memory while it
// runs (Admit, with no owner; the ticket is released when Run returns).
func (e *Engine) Run(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	t, err := e.Admit(ctx, Owner{}, sel, spec)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	return t.Run(ctx, sel, p)
}

// Call is Run without a slot, for callers with a bound of their own (the
// function executor): a pooled sandbox when a pool's template serves the
// call and has one ready (p reads the call from its Stdin), else a fresh
// one. Its events are of kind function.
func (e *Engine) Call(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return e.execute(ctx, event.Event{Kind: event.KindFunction}, func(ctx context.Context, a *attempt) (*sandbox.Result, error) {
		b, _, err := e.Select(ctx, sel)
		if err != nil {
			return nil, a.selectFault(err)
		}
		a.selected(b)
		if res, ok, err := e.pools.call(ctx, b.Name(), spec, p); ok {
			a.started = true
			return res, err
		}
		spec, _, err := e.checkSpec(spec)
		if err == nil {
			err = e.fits(b, spec)
		}
		if err != nil {
			return nil, err
		}
		sb, err := b.Create(ctx, spec)
		if err != nil {
			return nil, a.createFault(err)
		}
		a.started = true
		return sandbox.RunIn(ctx, sb, spec, p)
	})
}

// Create selects a backend for sel and creates a sandbox on it (sessions)
// under the configured policy. The sandbox holds a run slot and the result
// memory of its limits until it is closed.
func (e *Engine) Create(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec) (sandbox.Sandbox, error) {
	spec, _, err := e.checkSpec(spec)
	if err != nil {
		return nil, err
	}
	b, _, err := e.Select(ctx, sel)
	if err == nil {
		err = e.fits(b, spec)
	}
	if err != nil {
		return nil, err
	}
	release, err := e.gate.take(ctx, Owner{}, spec.Limits.ResultBytes(), e.gate.laneOf(b))
	if err != nil {
		return nil, err
	}
	sb, err := b.Create(ctx, spec)
	if err != nil {
		release()
		return nil, err
	}
	return &slotted{Sandbox: sb, release: release}, nil
}

// slotted is a sandbox that gives its slot back when it is closed.
type slotted struct {
	sandbox.Sandbox
	release func()
}

func (s *slotted) Close(ctx context.Context) error {
	defer s.release()
	return s.Sandbox.Close(ctx)
}

// Policy returns p under the configured policy: the configured env
// allowlist and prefixes added, the configured RunAsUser when one is set.
func (e *Engine) Policy(p sandbox.Policy) sandbox.Policy {
	c := e.opts.Policy
	p.EnvAllowlist = union(c.EnvAllowlist, p.EnvAllowlist)
	p.EnvAllowPrefix = union(c.EnvAllowPrefix, p.EnvAllowPrefix)
	if c.RunAsUser != "" {
		p.RunAsUser = c.RunAsUser
	}
	return p
}

// union is a followed by the entries of b it lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func errorf(kind *sandbox.Kind, code, format string, args ...any) error {
	return sandbox.Errorf(kind, code, format, args...)
}
