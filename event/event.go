package event

import (
	"time"
)

// Event types.
const (
	Started   = "execution.started"   // an attempt starts: selection, sandbox, program
	Retrying  = "execution.retrying"  // an attempt failed for an infrastructure fault; another follows after Delay
	Completed = "execution.completed" // the program ran and exited (any exit code)
	Failed    = "execution.failed"    // no program ran, or it ended otherwise (timeout, a limit, canceled, …)

	SessionCreated = "session.created"
	SessionClosed  = "session.closed"
	SessionExpired = "session.expired"
	SessionIdle    = "session.idle"

	// A guard rule holds an execution for an operator's decision
	// (Approval names it); its end says approved, denied, expired or
	// canceled (the caller left) in Reason.
	ApprovalRequested = "approval.requested"
	ApprovalDecided   = "approval.decided"

	// Dropped is no event of the engine's: a stream tells its reader
	// that it lost events (Event.Dropped), because it did not keep up.
	Dropped = "events.dropped"
)

// Kinds of execution.
const (
	KindRun         = "run"          // a one-shot run
	KindFunction    = "function"     // a function call
	KindSessionExec = "session_exec" // a command in a session
	KindContext     = "context"      // a call in a session's interpreter context
	KindSession     = "session"      // a session's own events
	KindTool        = "tool"         // a tool call (Tool names it)
	KindApproval    = "approval"     // an execution held by a guard rule
)

// Caller is what a caller says about an execution so that its events can
// be joined with its own records (an agent framework's run, graph node and
// tool call). Each is at most MaxCallerLen bytes of printable ASCII.
type Caller struct {
	RunID      string `json:"run_id,omitempty"`
	NodeName   string `json:"node_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// MaxCallerLen bounds each Caller field.
const MaxCallerLen = 256

// Event is one thing that happened.
type Event struct {
	// Seq numbers the events of one Bus from 1, in publication order.
	Seq  uint64    `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Caller
	// RequestID is the API request's id; Owner the token's name.
	RequestID string `json:"request_id,omitempty"`
	Owner     string `json:"token,omitempty"`
	Kind      string `json:"kind"`
	// Attempt counts from 1; an execution retried has several.
	Attempt   int    `json:"attempt,omitempty"`
	Backend   string `json:"backend,omitempty"`
	Isolation string `json:"isolation,omitempty"`
	Session   string `json:"session,omitempty"`
	Tool      string `json:"tool,omitempty"`
	// Approval and Rule: a held execution's approval id and the guard
	// rule that holds it.
	Approval string `json:"approval,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Duration is the attempt's (an execution's end) or the session's life.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Reason is how the program ended (a sandbox.Reason) or why a session
	// closed; ExitCode is the program's when it exited.
	Reason   string `json:"reason,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// ErrorCode and Error say why an execution failed without a result.
	ErrorCode string `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	// Delay is how long until the next attempt (Retrying).
	Delay time.Duration `json:"delay_ns,omitempty"`
	// Dropped is, in a Dropped notice, how many events this subscriber
	// has lost so far.
	Dropped uint64 `json:"dropped,omitempty"`
}

// Valid reports whether c's fields are within their bounds: printable
// ASCII, at most MaxCallerLen bytes each.
func (c Caller) Valid() (field string, ok bool) {
	for _, f := range []struct{ name, v string }{{"run_id", c.RunID}, {"node_name", c.NodeName}, {"tool_call_id", c.ToolCallID}} {
		if len(f.v) > MaxCallerLen {
			return f.name, false
		}
		for i := 0; i < len(f.v); i++ {
			if f.v[i] < 0x20 || f.v[i] > 0x7e {
				return f.name, false
			}
		}
	}
	return "", true
}
