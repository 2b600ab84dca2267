package server

import (
	"sync"

	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/sandbox"
)

// shares bounds something the server holds for callers at once (uploads
// streaming in, event streams open) as the engine's admission bounds runs:
// max in all, of which reserved are taken only by admin tokens, and at
// most perToken held by any other token, so that no token can lock the
// others, or an admin, out. On a server without tokens every caller is the
// zero engine.Owner and only max applies. Nothing waits: past a bound is
// refused at once (ErrBusy with code, naming the configuration key).
type shares struct {
	what, code string // "uploads", "too_many_uploads"
	// The configuration keys of the three bounds, named in refusals.
	maxKey, tokenKey, adminKey string
	max, reserved, perToken    int

	mu      sync.Mutex
	inUse   int
	byOwner map[string]int
}

// newShares bounds n holders; reserved is kept to max − 1, and perToken
// 0 means half of max (at least 1), as server.admin_runs and
// server.max_runs_per_token are.
func newShares(what, code string, n, perToken, reserved int, maxKey, tokenKey, adminKey string) *shares {
	if perToken <= 0 {
		perToken = max(1, (n+1)/2)
	}
	return &shares{what: what, code: code, maxKey: maxKey, tokenKey: tokenKey, adminKey: adminKey,
		max: n, reserved: max(0, min(reserved, n-1)), perToken: perToken, byOwner: map[string]int{}}
}

// take holds one for o, or says which bound refuses it. release gives it
// back; it is safe to call more than once.
func (s *shares) take(o engine.Owner) (release func(), err error) {
	shared := o.Name != "" && !o.Privileged
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.inUse >= s.max:
		return nil, sandbox.Errorf(sandbox.ErrBusy, s.code, "%d %s at once are the most this server serves (%s); try again later", s.max, s.what, s.maxKey)
	case shared && s.inUse >= s.max-s.reserved:
		return nil, sandbox.Errorf(sandbox.ErrBusy, s.code, "the free %s are kept for admin tokens (%s %d of %s %d); try again later",
			s.what, s.adminKey, s.reserved, s.maxKey, s.max)
	case shared && s.byOwner[o.Name] >= s.perToken:
		return nil, sandbox.Errorf(sandbox.ErrBusy, s.code, "token %s holds %d %s, its share (%s); try again later", o.Name, s.perToken, s.what, s.tokenKey)
	}
	s.inUse++
	if shared {
		s.byOwner[o.Name]++
	}
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inUse--
		if shared {
			if s.byOwner[o.Name]--; s.byOwner[o.Name] == 0 {
				delete(s.byOwner, o.Name)
			}
		}
	}), nil
}

// held is how many are held now.
func (s *shares) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse
}
