package guard

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/execbox/execbox/sandbox"
)

// Approval is a call held until an operator decides it.
type Approval struct {
	ID      string    `json:"id"`   // 32 hex digits, random
	Call    Call      `json:"call"` // what waits
	Rule    string    `json:"rule"` // the confirm rule; "" = the default action
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"` // refused as expired then
}

// pending is an approval being waited for. It is in Guard.pending until
// resolve takes it out, sets err and closes done, exactly once.
type pending struct {
	Approval
	seq  uint64
	done chan struct{}
	err  error // nil: approved
}

// Pending lists the approvals waiting for a decision, oldest first.
func (g *Guard) Pending() []Approval {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(g.now())
	ps := make([]*pending, 0, len(g.pending))
	for _, p := range g.pending {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *pending) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	out := make([]Approval, len(ps))
	for i, p := range ps {
		out[i] = p.Approval
	}
	return out
}

// Decide approves or denies the pending approval id on behalf of by (the
// deciding token's name), for reason (both optional, shown to the caller
// when denied). An id that is unknown, already decided, expired or
// abandoned by its caller is ErrNotFound, CodeApprovalNotFound. Unless
// Approvals.SelfApprove, a token may not approve a call of its own
// (ErrDenied, CodeSelfApproval; the call stays held): another must.
func (g *Guard) Decide(id string, approve bool, by, reason string) error {
	notFound := sandbox.Errorf(sandbox.ErrNotFound, CodeApprovalNotFound, "no pending approval %q", clip(id, 64))
	if g == nil {
		return notFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pending[id]
	if p == nil {
		return notFound
	}
	if !g.now().Before(p.Expires) {
		g.resolve(p, g.expired(p))
		return notFound
	}
	if approve && !g.self && by != "" && by == p.Call.Token {
		return sandbox.Errorf(sandbox.ErrDenied, CodeSelfApproval,
			"approval %s holds a call of token %q, which may not approve its own calls: another admin token must (guard.approvals.self_approve)", id, clip(by, 128))
	}
	var err error
	if !approve {
		who := "an operator"
		if by != "" {
			who = fmt.Sprintf("%q", clip(by, 128))
		}
		why := ""
		if reason != "" {
			why = ": " + clip(reason, 1024)
		}
		err = sandbox.Errorf(sandbox.ErrDenied, CodeApprovalDenied, "approval %s was denied by %s%s", id, who, why)
	}
	g.resolve(p, err)
	return nil
}

// hold waits for an operator's decision on c; nil means approved.
func (g *Guard) hold(ctx context.Context, c Call, rule string, notify func(Approval)) error {
	g.mu.Lock()
	now := g.now()
	g.expire(now)
	if err := g.room(c, now); err != nil {
		g.mu.Unlock()
		return err
	}
	g.seq++
	p := &pending{
		Approval: Approval{ID: newID(), Call: c, Rule: rule, Created: now, Expires: now.Add(g.timeout)},
		seq:      g.seq,
		done:     make(chan struct{}),
	}
	g.pending[p.ID] = p
	g.mu.Unlock()

	if notify != nil {
		notify(p.Approval)
	}
	t := time.NewTimer(p.Expires.Sub(g.now()))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		g.mu.Lock()
		g.resolve(p, g.expired(p)) // no-op if decided meanwhile
		g.mu.Unlock()
	case <-ctx.Done():
		// The caller is gone: nobody must be asked about it any more.
		err := sandbox.Errorf(sandbox.ErrUnavailable, codeInterrupted, "waiting for approval %s: %w", p.ID, ctx.Err())
		g.mu.Lock()
		g.resolve(p, err)
		g.mu.Unlock()
		return err
	}
	<-p.done
	return p.err
}

// room refuses c, busy, when it may not wait for approval now: every place
// is taken; or, for a token that is not an admin token, the free places
// are kept for admins or the token has its share waiting. The refusal
// says when the first approval whose end would let c wait expires. g.mu
// is held.
func (g *Guard) room(c Call, now time.Time) error {
	shared := c.Token != "" && !c.Admin
	mine := 0
	var first, firstMine time.Time
	for _, p := range g.pending {
		if first.IsZero() || p.Expires.Before(first) {
			first = p.Expires
		}
		if shared && p.Call.Token == c.Token {
			mine++
			if firstMine.IsZero() || p.Expires.Before(firstMine) {
				firstMine = p.Expires
			}
		}
	}
	var why string
	switch {
	case len(g.pending) >= g.maxPending:
		why = fmt.Sprintf("%d calls already wait for approval, the most allowed (guard.approvals.max_pending)", g.maxPending)
	case shared && len(g.pending) >= g.maxPending-g.adminOnly:
		why = fmt.Sprintf("%d calls wait for approval; the %d places left are kept for admin tokens' calls (guard.approvals.admin_pending)",
			len(g.pending), g.maxPending-len(g.pending))
	case shared && mine >= g.perToken:
		why, first = fmt.Sprintf("token %s has %d calls waiting for approval, its share (guard.approvals.max_pending_per_token)", c.Token, mine), firstMine
	default:
		return nil
	}
	after := first.Sub(now)
	return &BusyError{
		Err:   sandbox.Errorf(sandbox.ErrBusy, CodeApprovalsFull, "%s; the first expires in %s", why, roughly(after)),
		After: after,
	}
}

// expire resolves every approval whose time is up.
func (g *Guard) expire(now time.Time) {
	for _, p := range g.pending {
		if !now.Before(p.Expires) {
			g.resolve(p, g.expired(p))
		}
	}
}

// resolve ends p with err unless it has ended already. g.mu is held.
func (g *Guard) resolve(p *pending, err error) {
	if g.pending[p.ID] != p {
		return
	}
	delete(g.pending, p.ID)
	p.err = err
	close(p.done)
}

func (g *Guard) expired(p *pending) error {
	return sandbox.Errorf(sandbox.ErrDenied, CodeApprovalExpired, "approval %s expired: nobody decided within %s", p.ID, g.timeout)
}

// newID returns 128 random bits in hex. sandbox.NewID has 64: enough to
// name a sandbox, too few for an ID that lets its holder approve a run.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

// clip bounds s, an operator's or caller's text, for a message.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
