package hostbase

import (
	"context"
	"maps"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Health starts /bin/true in a sandbox of the backend, then the smoke
// check (sandbox.Smoke), and keeps what happened for TTL (forever when TTL
// is 0): a backend that is installed but cannot start a sandbox is
// unavailable, one whose sandboxes fail an ordinary program's needs is
// available but not ready, each with what failed as the reason.
func (b *Backend[F]) Health(ctx context.Context) sandbox.Health {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	if c := b.health; c != nil && (b.opts.TTL == 0 || time.Since(c.CheckedAt) < b.opts.TTL) {
		return copyHealth(*c)
	}
	h := b.Host()
	out := sandbox.Health{CheckedAt: time.Now(), Details: b.opts.HealthDetails(h)}
	if h.Err != nil {
		out.Reason = b.opts.Unavailable + h.Err.Error()
	} else {
		out.Available, out.Ready, out.Reason = b.probeHealth(ctx, h)
	}
	if ctx.Err() == nil {
		b.health = &out
	}
	return copyHealth(out)
}

// probeHealth runs /bin/true in a one-shot sandbox, then the smoke check.
func (b *Backend[F]) probeHealth(ctx context.Context, h *Host[F]) (ok, ready bool, reason string) {
	ctx, cancel := context.WithTimeout(sandbox.Probing(ctx), b.opts.ProbeTimeout)
	defer cancel()
	start := time.Now()
	res, err := sandbox.Run(ctx, b.self, sandbox.Spec{Limits: sandbox.Limits{Wall: b.opts.ProbeWall}}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		return false, false, "probe failed: " + err.Error()
	case !res.Succeeded():
		return false, false, b.opts.ProbeFailed(h, res)
	}
	took := time.Since(start)
	if ok, why := sandbox.Smoke(ctx, b.self, sandbox.Spec{Limits: sandbox.Limits{Wall: b.opts.ProbeWall}}); !ok {
		return true, false, "not ready: " + why
	}
	return true, true, b.opts.Ready(h, took)
}

// Expire makes the kept Health answer, and the host probe if it found the
// host unusable, as old as TTL: the next use probes again (with TTL 0
// nothing expires). For tests of the TTL rule.
func (b *Backend[F]) Expire() {
	if b.opts.TTL == 0 {
		return
	}
	old := time.Now().Add(-b.opts.TTL - time.Second)
	b.healthMu.Lock()
	if b.health != nil {
		b.health.CheckedAt = old
	}
	b.healthMu.Unlock()
	b.mu.Lock()
	if b.host != nil {
		b.host.at = old
	}
	b.mu.Unlock()
}

func copyHealth(h sandbox.Health) sandbox.Health {
	h.Details = maps.Clone(h.Details)
	return h
}
