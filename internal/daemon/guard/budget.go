package guard

import (
	"fmt"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// maxCounters bounds the live budget counters. Tokens come from
// configuration, so real use stays far below; this only stops a caller
// that makes up token names from growing the map without end.
var maxCounters = 100_000

// counterKey names one token's counters of one budget (by index).
type counterKey struct {
	budget int
	token  string
}

// counter is what one window has used. A window that ended is replaced,
// never reset, so a Pass charges the window that counted it.
type counter struct {
	end        time.Time
	executions int
	cpu        time.Duration
}

// take checks every budget that applies to token and, when count is set
// and all have room, counts one execution in each, returning their
// counters. A refusal names the first exhausted budget and retries when
// the last exhausted window ends.
func (g *Guard) take(token string, count bool) ([]*counter, error) {
	if len(g.budgets) == 0 {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !now.Before(g.sweepAt) {
		g.sweep(now)
	}
	var (
		refusal *BusyError
		keys    []counterKey
		fresh   int
	)
	for i := range g.budgets {
		b := &g.budgets[i]
		if !match(b.Tokens, token) {
			continue
		}
		k := counterKey{i, token}
		c := g.counters[k]
		if c != nil && !now.Before(c.end) {
			delete(g.counters, k)
			c = nil
		}
		if c == nil {
			fresh++
		} else if (b.Executions > 0 && c.executions >= b.Executions) || (b.CPU > 0 && c.cpu >= b.CPU) {
			after := c.end.Sub(now)
			if refusal == nil {
				refusal = &BusyError{Err: exhausted(b, token, c, after), After: after}
			}
			refusal.After = max(refusal.After, after)
		}
		keys = append(keys, k)
	}
	if refusal != nil {
		return nil, refusal
	}
	if !count || len(keys) == 0 {
		return nil, nil
	}
	if fresh > 0 && len(g.counters)+fresh > maxCounters {
		g.sweep(now)
		if len(g.counters)+fresh > maxCounters {
			return nil, g.full(now)
		}
	}
	out := make([]*counter, 0, len(keys))
	for _, k := range keys {
		c := g.counters[k]
		if c == nil {
			c = &counter{end: now.Add(g.budgets[k.budget].Window)}
			g.counters[k] = c
		}
		c.executions++
		out = append(out, c)
	}
	return out, nil
}

// sweep drops the counters of ended windows. It runs at most once per
// shortest window unless the cap forces it, so its cost stays amortized.
func (g *Guard) sweep(now time.Time) {
	for k, c := range g.counters {
		if !now.Before(c.end) {
			delete(g.counters, k)
		}
	}
	g.sweepAt = now.Add(g.minWindow)
}

// full refuses a call that needs a counter when none is free.
func (g *Guard) full(now time.Time) error {
	var first time.Time
	for _, c := range g.counters {
		if first.IsZero() || c.end.Before(first) {
			first = c.end
		}
	}
	after := first.Sub(now)
	return &BusyError{
		Err:   sandbox.Errorf(sandbox.ErrBusy, CodeBudgetExhausted, "the guard tracks %d budget windows already, the most it may; one ends in %s", len(g.counters), roughly(after)),
		After: after,
	}
}

// exhausted describes b's refusal of token.
func exhausted(b *Budget, token string, c *counter, after time.Duration) error {
	var used []string
	if b.Executions > 0 {
		used = append(used, fmt.Sprintf("%d of %d executions", c.executions, b.Executions))
	}
	if b.CPU > 0 {
		used = append(used, fmt.Sprintf("%s of %s CPU time", c.cpu, b.CPU))
	}
	return sandbox.Errorf(sandbox.ErrBusy, CodeBudgetExhausted,
		"budget %q is exhausted for token %q: %s used in its %s window, which ends in %s",
		b.Name, token, strings.Join(used, " and "), b.Window, roughly(after))
}

// roughly rounds d for people: to the second, or the millisecond below one.
func roughly(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
