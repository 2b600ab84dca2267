package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Action is what a rule does with the calls it matches.
type Action string

// The actions.
const (
	Allow   Action = "allow"
	Deny    Action = "deny"
	Confirm Action = "confirm" // hold until an operator approves
)

func (a Action) valid() bool { return a == Allow || a == Deny || a == Confirm }

// operations are the values Call.Operation takes.
var operations = []string{"run", "function", "lint", "tool", "session", "session_exec", "session_code", "session_terminal"}

// Operations lists the values Call.Operation takes: what a rule's
// operations may name.
func Operations() []string { return slices.Clone(operations) }

// Bounds of Approvals.
const (
	defaultTimeout    = 5 * time.Minute
	maxTimeout        = 24 * time.Hour
	defaultMaxPending = 64
	maxMaxPending     = 10000
)

// Rule matches a call when each of its non-empty lists holds the call's
// value exactly or holds "*". An empty list matches anything.
type Rule struct {
	Name       string   `yaml:"name" json:"name"`                       // required, unique; named in refusals
	Action     Action   `yaml:"action" json:"action"`                   // allow, deny or confirm
	Tokens     []string `yaml:"tokens" json:"tokens,omitempty"`         // token names; "" is the caller of a server without tokens
	Operations []string `yaml:"operations" json:"operations,omitempty"` // run, function, lint, tool, session, session_exec, session_code, session_terminal
	Tools      []string `yaml:"tools" json:"tools,omitempty"`           // tool names
	Languages  []string `yaml:"languages" json:"languages,omitempty"`   // languages
	Backends   []string `yaml:"backends" json:"backends,omitempty"`     // backend names
}

// Budget bounds what each token it applies to may run in a window. Every
// token gets its own counters.
type Budget struct {
	Name       string        `yaml:"name" json:"name"`                       // required, unique; named in refusals
	Tokens     []string      `yaml:"tokens" json:"tokens,omitempty"`         // empty or "*": every token
	Window     time.Duration `yaml:"window" json:"window"`                   // above 0
	Executions int           `yaml:"executions" json:"executions,omitempty"` // admitted calls per window; 0 = not limited
	CPU        time.Duration `yaml:"cpu" json:"cpu,omitempty"`               // CPU time charged per window; 0 = not limited
}

// Approvals bounds the calls held for confirmation, as the server's run
// slots are bounded (server.max_runs, max_runs_per_token, admin_runs), and
// says who may approve one.
type Approvals struct {
	Timeout    time.Duration `yaml:"timeout" json:"timeout,omitempty"`         // how long a call waits for a decision; 0 = 5m, at most 24h
	MaxPending int           `yaml:"max_pending" json:"max_pending,omitempty"` // calls waiting at once; 0 = 64, at most 10000
	// MaxPendingPerToken is the most calls one token that is not an admin
	// token has waiting at once; 0 = half of MaxPending, at least 1.
	MaxPendingPerToken int `yaml:"max_pending_per_token" json:"max_pending_per_token,omitempty"`
	// AdminPending of the MaxPending places are taken only by admin
	// tokens' calls, so that no other token can fill them all; at most
	// MaxPending − 1 are kept.
	AdminPending int `yaml:"admin_pending" json:"admin_pending,omitempty"`
	// SelfApprove lets a token approve a held call of its own; without it
	// another token must (denying one's own is always allowed).
	SelfApprove bool `yaml:"self_approve" json:"self_approve,omitempty"`
}

// Config is a guard's whole policy. Its zero value admits everything.
type Config struct {
	Rules     []Rule    `yaml:"rules" json:"rules,omitempty"`         // first match wins
	Default   Action    `yaml:"default" json:"default,omitempty"`     // when no rule matches; "" = allow
	Budgets   []Budget  `yaml:"budgets" json:"budgets,omitempty"`     // all that apply must pass
	Approvals Approvals `yaml:"approvals" json:"approvals,omitempty"` // for confirm
}

// Validate checks the whole configuration. The error (ErrInvalid, code
// CodeInvalid) lists every problem, naming each rule and budget by index
// and name.
func (c Config) Validate() error {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if c.Default != "" && !c.Default.valid() {
		add("default: unknown action %q (want allow, deny or confirm)", c.Default)
	}
	seen := map[string]int{}
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules[%d] %q", i, r.Name)
		if r.Name == "" {
			add("rules[%d]: name is required", i)
		} else if j, dup := seen[r.Name]; dup {
			add("%s: name already used by rules[%d]", at, j)
		} else {
			seen[r.Name] = i
		}
		if !r.Action.valid() {
			add("%s: unknown action %q (want allow, deny or confirm)", at, r.Action)
		}
		for _, op := range r.Operations {
			if op != "*" && !slices.Contains(operations, op) {
				add("%s: unknown operation %q (want %s or *)", at, op, strings.Join(operations, ", "))
			}
		}
	}
	seen = map[string]int{}
	for i, b := range c.Budgets {
		at := fmt.Sprintf("budgets[%d] %q", i, b.Name)
		if b.Name == "" {
			add("budgets[%d]: name is required", i)
		} else if j, dup := seen[b.Name]; dup {
			add("%s: name already used by budgets[%d]", at, j)
		} else {
			seen[b.Name] = i
		}
		if b.Window <= 0 {
			add("%s: window must be above 0", at)
		}
		if b.Executions < 0 {
			add("%s: executions must not be negative (0 = not limited)", at)
		}
		if b.CPU < 0 {
			add("%s: cpu must not be negative (0 = not limited)", at)
		}
		if b.Executions == 0 && b.CPU == 0 {
			add("%s: limits nothing (set executions, cpu or both)", at)
		}
	}
	a := c.Approvals
	if a.Timeout < 0 || a.Timeout > maxTimeout {
		add("approvals.timeout: %s is out of range (0 = %s, at most %s)", a.Timeout, defaultTimeout, maxTimeout)
	}
	if a.MaxPending < 0 || a.MaxPending > maxMaxPending {
		add("approvals.max_pending: %d is out of range (0 = %d, at most %d)", a.MaxPending, defaultMaxPending, maxMaxPending)
	}
	if a.MaxPendingPerToken < 0 || a.MaxPendingPerToken > maxMaxPending {
		add("approvals.max_pending_per_token: %d is out of range (0 = half of max_pending, at most %d)", a.MaxPendingPerToken, maxMaxPending)
	}
	if a.AdminPending < 0 || a.AdminPending > maxMaxPending {
		add("approvals.admin_pending: %d is out of range (0 to %d)", a.AdminPending, maxMaxPending)
	}
	if len(bad) == 0 {
		return nil
	}
	return sandbox.Errorf(sandbox.ErrInvalid, CodeInvalid, "guard config: %s", strings.Join(bad, "; "))
}

// Confirms names what holds calls for an operator: the first confirm
// rule, or "default" for a confirm default; "" when nothing does.
func (c Config) Confirms() string {
	for _, r := range c.Rules {
		if r.Action == Confirm {
			return r.Name
		}
	}
	if c.Default == Confirm {
		return "default"
	}
	return ""
}

// matches reports whether r applies to c.
func (r *Rule) matches(c *Call) bool {
	return match(r.Tokens, c.Token) && match(r.Operations, c.Operation) &&
		match(r.Tools, c.Tool) && match(r.Languages, c.Language) && match(r.Backends, c.Backend)
}

// match reports whether list lets v through: empty, holding v or "*".
func match(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, v) || slices.Contains(list, "*")
}
