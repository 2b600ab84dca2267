package engine

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// Owner is who a run is admitted for: the server passes the token. The
// zero Owner has no share to keep to (the CLI, a library caller, a server
// without tokens).
type Owner struct {
	// Name identifies the owner; "" is no owner.
	Name string
	// Privileged owners (admin tokens) may also take the ReservedRuns
	// slots and are held to no OwnerRuns share.
	Privileged bool
}

// AdmissionStats are the run gate's counters.
type AdmissionStats struct {
	// Slots and SlotsInUse: the run slots of every lane, and how many runs
	// (and created sandboxes) hold one now.
	Slots, SlotsInUse int
	// Lanes are the slots by where the runs go: the host's, and one per
	// remote backend that says its own capacity.
	Lanes []Lane
	// ResultMemory and ResultMemoryInUse: the result memory, and how much
	// of it the admitted runs reserve now.
	ResultMemory, ResultMemoryInUse int64
	// Queued is how many runs wait for admission now; QueueDepth the most
	// that may.
	Queued, QueueDepth int
	// SessionMemory and SessionMemoryInUse: what the open sessions' files
	// may hold together (SessionOptions.FileMemory), and how much of it
	// they hold now.
	SessionMemory, SessionMemoryInUse int64
}

// Lane is the run slots of the backends that share a capacity: Name
// "host" is this host's (every backend whose sandboxes run here, and
// every backend when server.max_runs is set), any other name a remote
// backend's (a cluster), sized by what it says bounds it.
type Lane struct {
	Name string `json:"lane"`
	// Slots and InUse: how many runs may be alive at once, and are.
	Slots int `json:"slots"`
	InUse int `json:"in_use"`
	// Source says where Slots came from.
	Source string `json:"source"`
}

// HostLane is the name of the host's lane.
const HostLane = "host"

// maxRemoteRuns bounds a remote lane whatever its backend says: each run
// in it still costs this server goroutines, a connection and its result
// memory (server.max_result_memory bounds that apart).
const maxRemoteRuns = 1024

// gate is the engine's admission. Runs take a slot of their lane — the
// host's (MaxRuns, else its cores) or a remote backend's (its Capacity) —
// of which ReservedRuns only privileged owners take and at most OwnerRuns
// (else half the lane's) one unprivileged owner holds, and ResultMemory
// bytes of which every run reserves its limits' ResultBytes. What does not
// fit waits in a queue of at most QueueDepth runs for at most QueueWait (a
// burst is served, not refused); past either it is refused with ErrBusy,
// code "busy".
type gate struct {
	fixed           bool // server.max_runs was set: every backend shares the host's lane
	hostSlots       int
	hostSource      string
	reserved, share int // as configured; share 0 is half a lane's slots
	memory          int64
	depth           int
	wait            time.Duration
	observe         func(waited time.Duration, admitted bool)

	mu      sync.Mutex
	lanes   map[string]*lane
	memUsed int64
	queued  int
	freed   chan struct{} // closed, and replaced, whenever a run is released
}

// lane is one lane's slots and holders.
type lane struct {
	slots   int
	source  string
	inUse   int
	byOwner map[string]int
}

// newGate makes the gate: maxRuns > 0 is server.max_runs, for every
// backend; 0 sizes the host's lane by its cores and each remote backend's
// by its capacity.
func newGate(maxRuns, reserved, share int, memory int64, depth int, wait time.Duration, observe func(time.Duration, bool)) *gate {
	if observe == nil {
		observe = func(time.Duration, bool) {}
	}
	g := &gate{reserved: reserved, share: share, memory: memory, depth: depth, wait: wait,
		observe: observe, lanes: map[string]*lane{}, freed: make(chan struct{})}
	g.fixed, g.hostSlots = maxRuns > 0, maxRuns
	g.hostSource = fmt.Sprintf("server.max_runs %d", maxRuns)
	if !g.fixed {
		g.hostSlots = runtime.NumCPU()
		g.hostSource = fmt.Sprintf("the host's %d cores; server.max_runs unset", g.hostSlots)
	}
	g.lanes[HostLane] = &lane{slots: g.hostSlots, source: g.hostSource, byOwner: map[string]int{}}
	return g
}

// laneOf names the lane of backend b's runs.
func (g *gate) laneOf(b sandbox.Backend) string {
	if b == nil || g.fixed || !b.Capabilities().Remote {
		return HostLane
	}
	return b.Name()
}

// laneLocked returns the lane name, made when first asked for: a remote
// lane whose backend has not said its capacity yet has the host's.
func (g *gate) laneLocked(name string) *lane {
	l := g.lanes[name]
	if l == nil {
		l = &lane{slots: g.hostSlots, source: g.hostSource + ", until backend " + name + " says its capacity", byOwner: map[string]int{}}
		g.lanes[name] = l
	}
	return l
}

// setCapacity sizes backend name's lane by what it said (Capacitor); a
// fixed gate (server.max_runs) keeps its one lane. Runs already holding
// slots keep them: a lane made smaller admits again once they are fewer.
func (g *gate) setCapacity(name string, c sandbox.Capacity) {
	if g.fixed || name == HostLane {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.laneLocked(name)
	l.slots, l.source = min(max(c.Runs, 0), maxRemoteRuns), c.Source
	if c.Runs > maxRemoteRuns {
		l.source += fmt.Sprintf(", at most %d (execbox's bound on one backend's runs)", maxRemoteRuns)
	}
	close(g.freed) // the queue tries again: the lane may have grown
	g.freed = make(chan struct{})
}

func busy(format string, args ...any) error {
	return sandbox.Errorf(sandbox.ErrBusy, "busy", format+"; try again later", args...)
}

// take admits one run of owner in lane (laneOf) holding mem bytes of
// results, waiting in the queue while it does not fit, or refuses.
// release gives it back; it is safe to call more than once.
func (g *gate) take(ctx context.Context, o Owner, mem int64, laneName string) (release func(), err error) {
	if mem > g.memory {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "limit_too_high",
			"limits: 2 × output + artifact_bytes is %s, more than the whole result memory %s (server.max_result_memory)",
			sandbox.FormatSize(mem), sandbox.FormatSize(g.memory))
	}
	start := time.Now()
	var timeout <-chan time.Time
	queued := false
	defer func() {
		if queued {
			g.mu.Lock()
			g.queued--
			g.mu.Unlock()
		}
		if queued || err == nil {
			g.observe(time.Since(start), err == nil)
		}
	}()
	for {
		g.mu.Lock()
		release, why := g.tryLocked(o, mem, laneName)
		if why == nil {
			g.mu.Unlock()
			return release, nil
		}
		if !queued {
			if g.queued >= g.depth || g.wait <= 0 {
				g.mu.Unlock()
				if g.depth > 0 && g.wait > 0 {
					return nil, busy("%v, and the admission queue is full (server.queue_depth %d)", why, g.depth)
				}
				return nil, busy("%v", why)
			}
			g.queued++
			queued = true
			t := time.NewTimer(g.wait)
			defer t.Stop()
			timeout = t.C
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-freed:
		case <-timeout:
			return nil, busy("%v, after waiting %v in the admission queue (server.queue_wait)", why, g.wait)
		case <-ctx.Done():
			return nil, sandbox.Errorf(sandbox.ErrUnavailable, "interrupted", "waiting for admission: %w", ctx.Err())
		}
	}
}

// tryLocked admits the run if it fits now; else it says why not.
func (g *gate) tryLocked(o Owner, mem int64, laneName string) (release func(), why error) {
	l := g.laneLocked(laneName)
	shared := o.Name != "" && !o.Privileged
	reserved := min(g.reserved, max(l.slots-1, 0))
	share := g.share
	if share == 0 {
		share = max(1, (l.slots+1)/2)
	}
	what := "every run slot is taken"
	if laneName != HostLane {
		what = "every run slot of backend " + laneName + " is taken"
	}
	switch {
	case l.inUse >= l.slots:
		return nil, fmt.Errorf("%s (%d: %s)", what, l.slots, l.source)
	case shared && l.inUse >= l.slots-reserved:
		return nil, fmt.Errorf("the free run slots are kept for admin tokens (server.admin_runs %d of %d: %s)", reserved, l.slots, l.source)
	case shared && l.byOwner[o.Name] >= share:
		return nil, fmt.Errorf("token %s holds %d run slots, its share (server.max_runs_per_token)", o.Name, share)
	case g.memUsed+mem > g.memory:
		return nil, fmt.Errorf("the runs in flight hold %s of the %s of result memory, and this one may need %s (server.max_result_memory)",
			sandbox.FormatSize(g.memUsed), sandbox.FormatSize(g.memory), sandbox.FormatSize(mem))
	}
	l.inUse++
	g.memUsed += mem
	if shared {
		l.byOwner[o.Name]++
	}
	return sync.OnceFunc(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		l.inUse--
		g.memUsed -= mem
		if shared {
			if l.byOwner[o.Name]--; l.byOwner[o.Name] == 0 {
				delete(l.byOwner, o.Name)
			}
		}
		close(g.freed) // the queue tries again
		g.freed = make(chan struct{})
	}), nil
}

// lane returns lane name's state.
func (g *gate) lane(name string) Lane {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.laneLocked(name).view(name)
}

// view is the lane as AdmissionStats report it. g.mu is held.
func (l *lane) view(name string) Lane {
	return Lane{Name: name, Slots: l.slots, InUse: l.inUse, Source: l.source}
}

func (g *gate) stats() AdmissionStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := AdmissionStats{ResultMemory: g.memory, ResultMemoryInUse: g.memUsed, Queued: g.queued, QueueDepth: g.depth}
	for _, name := range slices.Sorted(maps.Keys(g.lanes)) {
		l := g.lanes[name].view(name)
		st.Lanes = append(st.Lanes, l)
		st.Slots += l.Slots
		st.SlotsInUse += l.InUse
	}
	return st
}

// Admission returns the run gate's counters, and the sessions' memory.
func (e *Engine) Admission() AdmissionStats {
	st := e.gate.stats()
	st.SessionMemory, st.SessionMemoryInUse = e.opts.Sessions.FileMemory, e.sessions.files.inUse()
	return st
}

// budget is the memory the open sessions' files hold: each holds its
// work_size + tmp_size from before its sandbox is made until it is closed,
// of a total of which one unprivileged owner holds at most a share. What
// does not fit is refused at once (a session is no burst to queue for).
// The zero budget holds nothing.
type budget struct {
	mu      sync.Mutex
	used    int64
	byOwner map[string]int64
}

// hold takes n bytes of total for o (within share for an unprivileged
// owner), or refuses: ErrInvalid "limit_too_high" when n can never fit,
// ErrBusy "sessions_exhausted" when it does not now. release gives them
// back; it is safe to call more than once.
func (b *budget) hold(o Owner, n, total, share int64) (release func(), err error) {
	if n > total {
		return nil, errorf(sandbox.ErrInvalid, "limit_too_high",
			"limits: work_size + tmp_size is %s, more than the %s of memory all sessions' files may take (sessions.max_file_memory)",
			sandbox.FormatSize(n), sandbox.FormatSize(total))
	}
	shared := o.Name != "" && !o.Privileged
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.used+n > total:
		return nil, errorf(sandbox.ErrBusy, "sessions_exhausted",
			"the open sessions hold %s of the %s of memory their files may take (sessions.max_file_memory), and this one needs %s (work_size + tmp_size); close one first",
			sandbox.FormatSize(b.used), sandbox.FormatSize(total), sandbox.FormatSize(n))
	case shared && b.byOwner[o.Name]+n > share:
		return nil, errorf(sandbox.ErrBusy, "sessions_exhausted",
			"your sessions hold %s of your share of the sessions' file memory, %s (half of sessions.max_file_memory), and this one needs %s (work_size + tmp_size); close one first",
			sandbox.FormatSize(b.byOwner[o.Name]), sandbox.FormatSize(share), sandbox.FormatSize(n))
	}
	b.used += n
	if shared {
		if b.byOwner == nil {
			b.byOwner = map[string]int64{}
		}
		b.byOwner[o.Name] += n
	}
	return sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.used -= n
		if shared {
			if b.byOwner[o.Name] -= n; b.byOwner[o.Name] == 0 {
				delete(b.byOwner, o.Name)
			}
		}
	}), nil
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Ticket is an admitted run: it holds a run slot and the result memory of
// its limits from Admit until Release, so that a result is counted until
// whoever holds it has passed it on (the server: until its answer is
// written).
type Ticket struct {
	e       *Engine
	spec    sandbox.Spec
	sources map[string]string // where each limit came from
	owner   Owner
	lane    string // the gate's lane its slot is in
	release func()
}

// Admit admits a run of spec for owner on the backend sel selects: Plan,
// then Plan.Admit.
func (e *Engine) Admit(ctx context.Context, owner Owner, sel sandbox.Selection, spec sandbox.Spec) (*Ticket, error) {
	p, err := e.Plan(spec)
	if err != nil {
		return nil, err
	}
	return p.Admit(ctx, owner, sel)
}

// Plan is a run's spec checked, before it waits for a slot: a caller that
// asks something else first (the server's guard) refuses what could never
// run without checking it twice.
type Plan struct {
	e       *Engine
	spec    sandbox.Spec
	sources map[string]string
}

// Plan applies the configured defaults and maxima to spec's limits (a
// limit over its maximum is ErrInvalid naming the field, code
// limit_too_high) and the configured policy, and checks the result.
func (e *Engine) Plan(spec sandbox.Spec) (*Plan, error) {
	spec, sources, err := e.checkSpec(spec)
	if err != nil {
		return nil, err
	}
	return &Plan{e: e, spec: spec, sources: sources}, nil
}

// Limits are the planned run's limits, defaults and maxima applied.
func (p *Plan) Limits() sandbox.Limits { return p.spec.Limits }

// Admit takes a run slot for owner in the lane of the backend sel selects
// now (the host's, or a remote backend's) and reserves the result memory
// the limits allow (2 × output + artifact_bytes), within the owner's
// share; what does not fit waits in the admission queue (QueueDepth,
// QueueWait), and is refused with ErrBusy, code "busy", when the queue is
// full or the wait passes. A selection that fails now takes a host slot:
// Run selects again, and fails or retries as it would have. The caller
// must Release the ticket.
func (p *Plan) Admit(ctx context.Context, owner Owner, sel sandbox.Selection) (*Ticket, error) {
	b, _, _ := p.e.Select(ctx, sel)
	t := &Ticket{e: p.e, spec: p.spec, sources: p.sources, owner: owner, lane: p.e.gate.laneOf(b)}
	var err error
	if t.release, err = p.e.gate.take(ctx, owner, p.spec.Limits.ResultBytes(), t.lane); err != nil {
		return nil, err
	}
	return t, nil
}

// follow moves the ticket's slot to the lane of b, the backend a try
// selected, when that is not the one it was admitted in (auto choosing
// another backend since).
func (t *Ticket) follow(ctx context.Context, b sandbox.Backend) error {
	name := t.e.gate.laneOf(b)
	if name == t.lane {
		return nil
	}
	release, err := t.e.gate.take(ctx, t.owner, t.spec.Limits.ResultBytes(), name)
	if err != nil {
		return err
	}
	t.release()
	t.release, t.lane = release, name
	return nil
}

// Limits are the admitted run's limits, defaults and maxima applied.
func (t *Ticket) Limits() sandbox.Limits { return t.spec.Limits }

// Run selects a backend for sel and runs p in a one-shot sandbox of the
// admitted spec under the configured policy. The ticket stays held after
// Run returns, until Release.
func (t *Ticket) Run(ctx context.Context, sel sandbox.Selection, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	spec := t.spec
	return t.e.execute(ctx, event.Event{Kind: event.KindRun}, func(ctx context.Context, a *attempt) (*sandbox.Result, error) {
		b, _, err := t.e.Select(ctx, sel)
		if err != nil {
			return nil, a.selectFault(err)
		}
		a.selected(b)
		if err := t.e.fits(b, spec); err != nil {
			return nil, err
		}
		if err := t.follow(ctx, b); err != nil {
			return nil, err
		}
		sb, err := b.Create(ctx, spec)
		if err != nil {
			return nil, a.createFault(err)
		}
		a.started = true
		res, err := sandbox.RunIn(ctx, sb, spec, p)
		if res != nil {
			t.describe(res, sel)
		}
		return res, err
	})
}

// The way into a sandbox is one for a run (Plan, Admit, Ticket.Run), a
// call (Call), a session (OpenSession) and Create alike, in two steps:
// checkSpec before any slot is waited for, fits once a backend is
// selected. A limit, a policy or a check added there applies to all, and
// a spec is validated there once (the backend that makes it checks what
// it is handed, as its contract says).

// checkSpec applies the configured limits and policy to spec and checks
// the result: an image the configuration does not list, a limit beyond
// its maximum, an invalid spec are refused. sources says where each limit
// came from.
func (e *Engine) checkSpec(spec sandbox.Spec) (sandbox.Spec, map[string]string, error) {
	spec.Root = nil // the engine's to set
	if spec.Image != "" && e.opts.Roots != nil {
		root, err := e.opts.Roots(spec.Image)
		switch {
		case err == nil:
			spec.Root = root
			spec.Env = imageEnv(root.Env, spec.Env)
		case sandbox.KindOf(err) != sandbox.ErrNotFound && e.checkImage(spec.Image) != nil:
			// A listed image goes on by name whatever the store says.
			return spec, nil, err
		}
	}
	if spec.Root == nil {
		if err := e.checkImage(spec.Image); err != nil {
			return spec, nil, err
		}
	}
	// The request as given: filled from the (valid) defaults and merged
	// with the configured policy (environment names, the user), it stays
	// valid.
	if err := spec.Validate(); err != nil {
		return spec, nil, err
	}
	sources := e.sources(spec.Limits.Set())
	var err error
	if spec.Limits, err = e.fill(spec.Limits); err != nil {
		return spec, nil, err
	}
	spec.Policy = e.Policy(spec.Policy)
	return spec, sources, nil
}

// imageEnv is an image's variables under the call's own: a new map, the
// call's untouched. HOME and TMPDIR stay the contract's.
func imageEnv(image []string, call map[string]string) map[string]string {
	out := maps.Clone(call)
	for _, kv := range image {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "HOME" || k == "TMPDIR" {
			continue
		}
		if _, set := out[k]; !set {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// fits refuses a checked spec the selected backend b cannot make. An
// image both in the store and listed (images) goes to a backend of its
// own images (docker) by name.
func (e *Engine) fits(b sandbox.Backend, spec sandbox.Spec) error {
	caps := b.Capabilities()
	if spec.Root != nil && !caps.RootImages && !(caps.Images && e.checkImage(spec.Image) == nil) {
		return errorf(sandbox.ErrInvalid, "image_unsupported", "image %q is in execbox's image store, and backend %s cannot mount those (yet); choose one that can: native, bwrap or gvisor", spec.Image, b.Name())
	}
	if spec.Root == nil && spec.Image != "" && !caps.Images {
		return errorf(sandbox.ErrInvalid, "image_unsupported", "image %q: backend %s has no images (it runs on the host's files); choose a backend that has, such as docker", spec.Image, b.Name())
	}
	return nil
}

// describe puts the run's limits in res, and where they, its backend and
// its network came from.
func (t *Ticket) describe(res *sandbox.Result, sel sandbox.Selection) {
	l := t.spec.Limits
	res.Limits = &l
	res.Sources = maps.Clone(t.sources)
	switch {
	case sel != (sandbox.Selection{}):
		res.Sources["backend"] = sandbox.FromCall
	case t.e.opts.Configured["backend"]:
		res.Sources["backend"] = sandbox.FromConfig
	default:
		res.Sources["backend"] = sandbox.FromDefault
	}
	res.Sources["network"] = fromCall(t.spec.Policy.Network != "")
	res.Sources["image"] = fromCall(t.spec.Image != "")
	res.Sources["tmp_exec"] = fromCall(t.spec.Policy.TmpExec)
}

// fromCall is where a setting with no configuration key came from.
func fromCall(set bool) string {
	if set {
		return sandbox.FromCall
	}
	return sandbox.FromDefault
}

// checkImage refuses an image the configuration does not list.
func (e *Engine) checkImage(image string) error {
	if image == "" || slices.Contains(e.opts.Images, image) {
		return nil
	}
	return errorf(sandbox.ErrDenied, "image_denied", "image %q is not one a request may name; the configuration's images key lists them (now: %s)", image, orNone(e.opts.Images))
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// sources says where each limit comes from: the call for those it set,
// else the configuration or execbox's defaults.
func (e *Engine) sources(set []string) map[string]string {
	out := map[string]string{}
	for _, n := range sandbox.LimitNames() {
		out[n] = sandbox.FromDefault
		if e.opts.Configured[n] {
			out[n] = sandbox.FromConfig
		}
	}
	for _, n := range set {
		out[n] = sandbox.FromCall
	}
	return out
}

// Release gives the slot and the result memory back. It is safe to call
// more than once.
func (t *Ticket) Release() { t.release() }
