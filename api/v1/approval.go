package v1

import (
	"time"

	"github.com/execbox/execbox/event"
)

// Approval is an execution a guard rule holds until an operator decides
// it (GET /v1/approvals): what would run, for whom, and until when it
// waits.
type Approval struct {
	ID   string `json:"id"`
	Rule string `json:"rule"`
	// Token is the caller's token name ("" on a server without tokens).
	Token     string `json:"token,omitempty"`
	Operation string `json:"operation"`
	Tool      string `json:"tool,omitempty"`
	Language  string `json:"language,omitempty"`
	Backend   string `json:"backend,omitempty"`
	event.Caller
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Approvals is GET /v1/approvals' answer, oldest first.
type Approvals struct {
	Approvals []Approval `json:"approvals"`
}

// Decision is the body of POST /v1/approvals/{id}.
type Decision struct {
	// Approve lets the held execution run (true) or refuses it (false,
	// approval_denied); required.
	Approve *bool `json:"approve"`
	// Reason is told to the caller of a denied execution.
	Reason string `json:"reason,omitempty"`
}
