package v1

import "github.com/execbox/execbox/event"

// Event is one lifecycle event, as GET /v1/events streams it (server-sent
// events: id the Seq, event the Type, data the Event as JSON).
type Event = event.Event

// Caller names a caller's run, graph node and tool call; sent as the
// headers X-Execbox-Run-Id, X-Execbox-Node-Name and X-Execbox-Tool-Call-Id,
// it is carried by every event of the execution.
type Caller = event.Caller

// EventFilter is GET /v1/events' query: every field given must match.
type EventFilter struct {
	Caller
	// Types are event types, or prefixes ending in "." ("session.").
	Types   []string
	Kind    string
	Session string
}
