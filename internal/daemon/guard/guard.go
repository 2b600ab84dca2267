package guard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// The stable codes of this package's errors.
const (
	CodeDenied           = "guard_denied"       // ErrDenied: a rule (or the default) denies the call
	CodeApprovalDenied   = "approval_denied"    // ErrDenied: an operator denied the call
	CodeApprovalExpired  = "approval_expired"   // ErrDenied: nobody decided in time
	CodeApprovalsFull    = "approvals_full"     // ErrBusy: too many calls wait for approval
	CodeBudgetExhausted  = "budget_exhausted"   // ErrBusy: a budget's window is used up
	CodeApprovalNotFound = "approval_not_found" // ErrNotFound: no such pending approval
	CodeSelfApproval     = "self_approval"      // ErrDenied: a token approves its own call (Approvals.SelfApprove)
	CodeInvalid          = "guard_invalid"      // ErrInvalid: the Config is wrong
	codeInterrupted      = "interrupted"        // ErrUnavailable: the caller left while held (the engine's code)
)

// Call is one execution request as the guard sees it.
type Call struct {
	Token     string `json:"token"`              // token name; "" on a server without tokens
	Operation string `json:"operation"`          // run, function, lint, tool, session, session_exec, session_code, session_terminal
	Tool      string `json:"tool,omitempty"`     // tool name, for a tool call
	Language  string `json:"language,omitempty"` // language, when there is one
	Backend   string `json:"backend,omitempty"`  // backend asked for ("" or auto: not yet chosen)
	// Admin says Token is an admin token: its held calls may take the
	// places kept for admins and are held to no per-token share. Never
	// matched by a rule.
	Admin bool `json:"admin,omitempty"`
	// Continued says the call goes on with one admitted before (what is
	// typed into an open terminal): a rule that denies refuses it and an
	// exhausted budget refuses it, but a confirm rule does not hold it
	// again (its call was decided) and it counts no execution. Never
	// matched by a rule.
	Continued bool `json:"continued,omitempty"`

	// For the operator deciding an approval; never matched.
	RunID      string `json:"run_id,omitempty"`
	NodeName   string `json:"node_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Guard applies a Config. Make one with New.
type Guard struct {
	rules      []Rule
	def        Action
	budgets    []Budget
	minWindow  time.Duration // shortest budget window: how often ended counters are swept
	timeout    time.Duration
	maxPending int
	perToken   int              // Approvals.MaxPendingPerToken, resolved
	adminOnly  int              // Approvals.AdminPending, at most maxPending − 1
	self       bool             // Approvals.SelfApprove
	now        func() time.Time // time.Now; tests set it

	mu       sync.Mutex
	pending  map[string]*pending
	seq      uint64 // orders approvals created at the same instant
	counters map[counterKey]*counter
	sweepAt  time.Time // when the next sweep of ended counters is due
}

// New returns a Guard for c, or c's validation error.
func New(c Config) (*Guard, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{
		def:        c.Default,
		timeout:    c.Approvals.Timeout,
		maxPending: c.Approvals.MaxPending,
		now:        time.Now,
		pending:    map[string]*pending{},
		counters:   map[counterKey]*counter{},
	}
	if g.def == "" {
		g.def = Allow
	}
	if g.timeout == 0 {
		g.timeout = defaultTimeout
	}
	if g.maxPending == 0 {
		g.maxPending = defaultMaxPending
	}
	g.perToken = c.Approvals.MaxPendingPerToken
	if g.perToken == 0 {
		g.perToken = max(1, (g.maxPending+1)/2)
	}
	g.adminOnly = min(c.Approvals.AdminPending, g.maxPending-1)
	g.self = c.Approvals.SelfApprove
	// Deep copies: the caller's slices stay theirs to change.
	for _, r := range c.Rules {
		r.Tokens, r.Operations, r.Tools = slices.Clone(r.Tokens), slices.Clone(r.Operations), slices.Clone(r.Tools)
		r.Languages, r.Backends = slices.Clone(r.Languages), slices.Clone(r.Backends)
		g.rules = append(g.rules, r)
	}
	for _, b := range c.Budgets {
		b.Tokens = slices.Clone(b.Tokens)
		g.budgets = append(g.budgets, b)
		if g.minWindow == 0 || b.Window < g.minWindow {
			g.minWindow = b.Window
		}
	}
	return g, nil
}

// UsesBackends says whether a rule looks at the backend: then a call's
// Backend must be the one that will run it, resolved before Admit.
func (g *Guard) UsesBackends() bool {
	if g == nil {
		return false
	}
	for _, r := range g.rules {
		if len(r.Backends) > 0 {
			return true
		}
	}
	return false
}

// Admit decides c. The first matching rule applies: deny refuses (ErrDenied,
// CodeDenied, naming the rule); confirm holds c as a pending Approval until
// it is decided, expires or ctx is done. notify, when not nil, is called
// once with that approval before Admit waits, so the caller can publish it.
// Then every budget that applies to c.Token must have room (else a
// *BusyError, CodeBudgetExhausted) and counts the execution. On admission
// the Pass must be charged with the run's CPU time when it ends.
func (g *Guard) Admit(ctx context.Context, c Call, notify func(Approval)) (*Pass, error) {
	if g == nil {
		return &Pass{}, nil
	}
	rule, action := "", g.def
	for i := range g.rules {
		if g.rules[i].matches(&c) {
			rule, action = g.rules[i].Name, g.rules[i].Action
			break
		}
	}
	switch action {
	case Deny:
		if rule == "" {
			return nil, sandbox.Errorf(sandbox.ErrDenied, CodeDenied, "denied by the guard's default action")
		}
		return nil, sandbox.Errorf(sandbox.ErrDenied, CodeDenied, "denied by guard rule %q", rule)
	case Confirm:
		if c.Continued {
			break // decided when the call it goes on with was held
		}
		// Asking an operator about a call its budget refuses anyway
		// wastes their time; the budget is checked again after approval.
		if _, err := g.take(c.Token, false); err != nil {
			return nil, err
		}
		if err := g.hold(ctx, c, rule, notify); err != nil {
			return nil, err
		}
	}
	counted, err := g.take(c.Token, !c.Continued)
	if err != nil {
		return nil, err
	}
	p := &Pass{rule: rule, counters: counted}
	if len(counted) > 0 {
		p.g = g
	}
	return p, nil
}

// Pass is an admitted call.
type Pass struct {
	g        *Guard // nil when no budget counted the call
	rule     string
	counters []*counter // guarded by g.mu
	charged  bool       // guarded by g.mu
}

// Charge adds the run's CPU time to the budget windows that counted it.
// Only the first call counts; it is safe on a nil Pass.
func (p *Pass) Charge(cpu time.Duration) {
	if p == nil || p.g == nil {
		return
	}
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	if p.charged {
		return
	}
	p.charged = true
	for _, c := range p.counters {
		c.cpu += max(cpu, 0)
	}
}

// Rule is the name of the rule that admitted the call; "" when no rule
// matched and the default did.
func (p *Pass) Rule() string {
	if p == nil {
		return ""
	}
	return p.rule
}

// BusyError is a refusal that may succeed later (ErrBusy): it says when.
type BusyError struct {
	Err   error // a *sandbox.Error of kind ErrBusy
	After time.Duration
}

func (e *BusyError) Error() string { return e.Err.Error() }
func (e *BusyError) Unwrap() error { return e.Err }

// RetryAfter is how long the caller should wait before trying again.
func (e *BusyError) RetryAfter() time.Duration { return e.After }
