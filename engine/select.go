package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/execbox/execbox/sandbox"
)

// Tiers a request may ask for.
const (
	TierStrict   = "strict"
	TierStandard = "standard"
	TierFast     = "fast"
)

// Decision says which backend a selection chose and why.
type Decision struct {
	Backend   string            `json:"backend"`
	Isolation sandbox.Isolation `json:"isolation"`
	Because   string            `json:"selected_because"`
}

// Select picks the backend a request with sel runs on, or says why none may.
func (e *Engine) Select(ctx context.Context, sel sandbox.Selection) (sandbox.Backend, Decision, error) {
	if e.opts.Backend == "off" {
		return nil, Decision{}, errorf(sandbox.ErrDenied, "backend_off",
			"execution is turned off (backend: off): nothing runs, tier requests included")
	}
	floor, why, err := e.floor(sel)
	if err != nil {
		return nil, Decision{}, err
	}
	name := sel.Backend
	if name == "" && sel.Tier == "" && e.opts.Backend != "auto" {
		name = e.opts.Backend
	}
	if name != "" {
		return e.named(ctx, name, floor, why)
	}
	return e.pick(ctx, sel.Tier, floor, why)
}

// floor is the weakest isolation sel may run with, and why.
func (e *Engine) floor(sel sandbox.Selection) (sandbox.Isolation, string, error) {
	floor, why := e.opts.MinIsolation, "the configured min_isolation"
	raise := func(l sandbox.Isolation, because string) {
		if l > floor {
			floor, why = l, because
		}
	}
	if sel.Backend != "" && sel.Tier != "" {
		return 0, "", errorf(sandbox.ErrInvalid, "selection_invalid", "give a backend or a tier, not both (backend %q, tier %q)", sel.Backend, sel.Tier)
	}
	switch sel.Tier {
	case "":
	case TierStrict:
		raise(sandbox.IsolationKernel, "tier strict")
	case TierStandard, TierFast:
		raise(sandbox.IsolationProcess, "tier "+sel.Tier)
	default:
		return 0, "", errorf(sandbox.ErrInvalid, "tier_unknown",
			"unknown tier %q: tiers are strict, standard and fast, and a tier never names a backend", sel.Tier)
	}
	if sel.MinIsolation != "" {
		l, err := sandbox.ParseIsolation(sel.MinIsolation)
		if err != nil {
			return 0, "", err
		}
		raise(l, "the request's min_isolation")
	}
	// A configured backend is the floor: a request may raise it, never lower
	// it. One that could not even be built has no level to compare with, so
	// nothing may go around it.
	if cfg := e.opts.Backend; cfg != "auto" && cfg != "off" && cfg != "local" && (sel.Backend != "" || sel.Tier != "") {
		b, ok := e.backends[cfg]
		if !ok {
			return 0, "", errorf(sandbox.ErrUnavailable, "backend_unavailable",
				"the configured backend %s is unavailable (%s); a request may not run below it", cfg, e.reason(cfg))
		}
		raise(b.Capabilities().Isolation, "the configured backend "+cfg)
	}
	return floor, why, nil
}

func (e *Engine) named(ctx context.Context, name string, floor sandbox.Isolation, why string) (sandbox.Backend, Decision, error) {
	b, ok := e.backends[name]
	if !ok {
		if slices.Contains(e.order, name) { // registered, but its factory failed
			return nil, Decision{}, errorf(sandbox.ErrUnavailable, "backend_unavailable", "backend %s is unavailable: %s", name, e.reason(name))
		}
		return nil, Decision{}, errorf(sandbox.ErrInvalid, "backend_unknown", "unknown backend %q (known: %s)", name, strings.Join(e.order, ", "))
	}
	iso := b.Capabilities().Isolation
	if iso == sandbox.IsolationNone && !e.opts.AllowUnisolated {
		return nil, Decision{}, errorf(sandbox.ErrDenied, "unisolated_not_allowed",
			"backend %s runs code with no isolation and is refused unless allow_unisolated is set (EXECBOX_ALLOW_UNISOLATED=true); execbox never falls back to it", name)
	}
	if iso < floor {
		return nil, Decision{}, errorf(sandbox.ErrDenied, "isolation_too_weak",
			"backend %s gives isolation %s, below the %s required by %s", name, iso, floor, why)
	}
	if err := e.weakRefused(name, b); err != nil {
		return nil, Decision{}, err
	}
	// A named backend is not probed apart from the run: starting the
	// sandbox is the probe, and a failed start fails closed. Only what is
	// already known refuses it up front.
	if h, ok := e.knownHealth(name); ok && !h.Available {
		return nil, Decision{}, errorf(sandbox.ErrUnavailable, "backend_unavailable",
			"backend %s is unavailable: %s (execbox does not fall back to another backend)", name, h.Reason)
	}
	return b, Decision{Backend: name, Isolation: iso, Because: "named: " + name}, nil
}

// pick chooses among the isolated backends for auto or a tier: it orders
// the candidates that may run the request (strongest first, or fastest
// for tier fast) and probes them in that order only until the first one
// is available and ready — a CLI run pays for no probe beyond the backend
// it uses.
func (e *Engine) pick(ctx context.Context, tier string, floor sandbox.Isolation, why string) (sandbox.Backend, Decision, error) {
	type cand struct {
		name string
		iso  sandbox.Isolation
		pref int
	}
	var cands []cand
	var refused []string
	// What each backend can do, asked side by side: a first Capabilities
	// looks at the host (cgroups, binaries, a VM image), and a CLI run
	// pays for it once per backend.
	capsOf := make([]sandbox.Capabilities, len(e.order))
	var wg sync.WaitGroup
	for i, name := range e.order {
		if b, ok := e.backends[name]; ok {
			wg.Go(func() { capsOf[i] = b.Capabilities() })
		}
	}
	wg.Wait()
	for i, name := range e.order {
		b, ok := e.backends[name]
		if !ok {
			refused = append(refused, name+": "+e.reason(name))
			continue
		}
		caps := capsOf[i]
		iso := caps.Isolation
		if iso == sandbox.IsolationNone {
			continue // never picked by auto or a tier
		}
		if caps.Emulated && tier == "" && floor < iso {
			// Strong but many times slower: only a tier, a floor at its
			// level or its name asks for it.
			refused = append(refused, name+": runs under software emulation here; auto never picks it (ask for it by name, with tier strict or with min_isolation "+iso.String()+")")
			continue
		}
		if iso < floor {
			refused = append(refused, fmt.Sprintf("%s: isolation %s is below %s (%s)", name, iso, floor, why))
			continue
		}
		if err := e.weakRefused(name, b); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			refused = append(refused, name+": "+first+" (allow_weak_limits accepts them)")
			continue
		}
		pref := slices.Index(e.opts.Preference, name)
		if pref < 0 {
			pref = len(e.opts.Preference)
		}
		cands = append(cands, cand{name, iso, pref})
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if tier == TierFast {
			if a.pref != b.pref {
				return a.pref - b.pref
			}
			return int(a.iso - b.iso) // weaker is faster when unranked
		}
		if a.iso != b.iso {
			return int(b.iso - a.iso)
		}
		return a.pref - b.pref
	})
	if len(cands) == 0 && !e.anyAtLeast(floor) {
		// Nothing here could ever give that isolation: asking again will
		// not help, so it is the request's problem, not a passing state.
		return nil, Decision{}, errorf(sandbox.ErrInvalid, "isolation_unsupported",
			"no backend of this execbox gives isolation %s or stronger (%s); the strongest here is %s",
			floor, why, e.strongest())
	}
	chosen := -1
	for i, c := range cands {
		h, err := e.healthOf(ctx, c.name)
		if err != nil {
			return nil, Decision{}, err
		}
		if h.Available && h.Ready {
			chosen = i
			break
		}
		refused = append(refused, c.name+": "+h.Reason)
	}
	if chosen < 0 {
		what := "auto"
		if tier != "" {
			what = "tier " + tier
		}
		return nil, Decision{}, errorf(sandbox.ErrUnavailable, "no_backend",
			"no backend is available and ready for %s at isolation %s or stronger (%s); execbox never falls back to weaker isolation",
			what, floor, strings.Join(refused, "; "))
	}
	c := cands[chosen]
	because := fmt.Sprintf("auto: the strongest available and ready backend (isolation %s)", c.iso)
	switch tier {
	case TierFast:
		because = fmt.Sprintf("tier fast: the fastest ready backend of isolation %s or stronger", floor)
	case TierStrict, TierStandard:
		because = fmt.Sprintf("tier %s: the strongest ready backend of isolation %s or stronger", tier, floor)
	}
	// The ones after it were not probed for this; say what is known.
	var others []string
	for _, o := range cands[chosen+1:] {
		if h, ok := e.knownHealth(o.name); ok && h.Available && h.Ready {
			others = append(others, o.name)
		} else if ok {
			refused = append(refused, o.name+": "+h.Reason)
		}
	}
	if len(others) > 0 {
		because += "; also ready: " + strings.Join(others, ", ")
	}
	if len(refused) > 0 {
		because += "; not used: " + strings.Join(refused, "; ")
	}
	return e.backends[c.name], Decision{Backend: c.name, Isolation: c.iso, Because: because}, nil
}

// weakRefused refuses backend b when its limits do not bound a sandbox as
// a whole here (Capabilities.Weak) and weak limits are not allowed: a run
// never gets weaker bounds than it asked for without the operator saying
// so. An unisolated backend is exempt: allow_unisolated already says it.
func (e *Engine) weakRefused(name string, b sandbox.Backend) error {
	caps := b.Capabilities()
	if len(caps.Weak) == 0 || e.opts.AllowWeakLimits || caps.Isolation == sandbox.IsolationNone {
		return nil
	}
	why := ""
	if caps.WeakWhy != "" {
		why = ": " + caps.WeakWhy
	}
	// The fix on a line of its own, after what and why (said once).
	return errorf(sandbox.ErrUnavailable, "limits_unenforceable",
		"backend %s cannot enforce the limits as asked here (%s)%s\n"+
			"to run with these weaker limits: EXECBOX_ALLOW_WEAK_LIMITS=true (allow_weak_limits: true); for real ones, run execbox as root or in a delegated cgroup (a systemd unit or user slice with Delegate=yes)",
		name, WeakLimits(caps), why)
}

// WeakLimits says how the limits a backend cannot enforce as asked are
// bounded instead (Capabilities.Weak), one clause each, in a stable order.
func WeakLimits(caps sandbox.Capabilities) string {
	var ws []string
	for _, k := range slices.Sorted(maps.Keys(caps.Weak)) {
		ws = append(ws, k+" "+caps.Weak[k])
	}
	return strings.Join(ws, "; ")
}

// anyAtLeast reports whether a registered backend — built or not, ready or
// not — gives isolation floor or stronger.
func (e *Engine) anyAtLeast(floor sandbox.Isolation) bool {
	for _, name := range e.order {
		b, ok := e.backends[name]
		if !ok {
			return true // failed to build: what it would give is unknown
		}
		if iso := b.Capabilities().Isolation; iso >= floor && iso != sandbox.IsolationNone {
			return true
		}
	}
	return false
}

// strongest names the strongest isolation any backend here gives.
func (e *Engine) strongest() sandbox.Isolation {
	var best sandbox.Isolation
	for _, b := range e.backends {
		best = max(best, b.Capabilities().Isolation)
	}
	return best
}

func (e *Engine) reason(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.health[name]; ok {
		return p.h.Reason
	}
	return "not probed"
}

// Candidate is one backend in the health report.
type Candidate struct {
	Name         string            `json:"name"`
	Isolation    sandbox.Isolation `json:"isolation"`
	Available    bool              `json:"available"`
	Ready        bool              `json:"ready"`
	Reason       string            `json:"reason"`
	Details      map[string]string `json:"details,omitempty"`
	Enforcement  map[string]string `json:"enforcement,omitempty"`
	Sessions     bool              `json:"sessions"`
	Unisolated   bool              `json:"unisolated,omitempty"`
	AllowedByCfg bool              `json:"allowed"`
	// Capacity is the run lane the backend's runs take slots of: how many
	// may be alive at once, how many are, and what says so.
	Capacity *Lane `json:"capacity,omitempty"`
	// Warm is what the backend's warm pool holds now, per shape, and why
	// (a sandbox.Warmer's; none for the others).
	Warm []sandbox.Warm `json:"warm,omitempty"`
}

// Report is the selection report (seed 001's health, `execbox doctor`).
type Report struct {
	Configured      string         `json:"configured"`
	Backend         string         `json:"backend"`
	Isolation       string         `json:"isolation,omitempty"`
	SelectedBecause string         `json:"selected_because"`
	Defaults        sandbox.Limits `json:"defaults"`
	Candidates      []Candidate    `json:"candidates"`
	Pools           PoolsStatus    `json:"pools"`
}

// Report probes (or reuses probes of) every backend and says what the
// configured choice resolves to and why.
func (e *Engine) Report(ctx context.Context) Report {
	r := Report{Configured: e.opts.Backend, Defaults: e.opts.Defaults, Pools: e.Pools()}
	for _, name := range e.order {
		c := Candidate{Name: name, Reason: e.reason(name)}
		if b, ok := e.backends[name]; ok {
			caps := b.Capabilities()
			h, _ := e.healthOf(ctx, name)
			l := e.gate.lane(e.gate.laneOf(b)) // after the probe, which may have sized it
			c.Capacity = &l
			if w, ok := b.(sandbox.Warmer); ok {
				c.Warm = w.Warm()
			}
			c.Isolation, c.Sessions, c.Enforcement = caps.Isolation, caps.Sessions, caps.Limits
			c.Available, c.Ready, c.Reason, c.Details = h.Available, h.Ready, h.Reason, h.Details
			c.Unisolated = caps.Isolation == sandbox.IsolationNone
			c.AllowedByCfg = !c.Unisolated || e.opts.AllowUnisolated
			if err := e.weakRefused(name, b); err != nil && c.Ready {
				// Ready as a backend, but not for a run here: say so, as
				// the selection below will.
				first, _, _ := strings.Cut(err.Error(), "\n")
				c.Ready, c.Reason = false, first+"; allow_weak_limits: true accepts them"
			}
		}
		r.Candidates = append(r.Candidates, c)
	}
	_, d, err := e.Select(ctx, sandbox.Selection{})
	if err != nil {
		r.SelectedBecause = err.Error()
		return r
	}
	r.Backend, r.Isolation, r.SelectedBecause = d.Backend, d.Isolation.String(), d.Because
	return r
}
