package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/event"
)

// The headers a caller names its execution by (event.Caller), carried by
// every event of it.
const (
	HeaderRunID      = "X-Execbox-Run-Id"
	HeaderNodeName   = "X-Execbox-Node-Name"
	HeaderToolCallID = "X-Execbox-Tool-Call-Id"
)

// heartbeat is how often an idle event stream gets a comment line, so that
// proxies and clients see it alive.
const heartbeat = 15 * time.Second

// withCall puts the request's call (its id, the token, the caller's ids
// from the headers) in its context for the engine's events; false when a
// header is invalid (answered 400).
func (s *Server) withCall(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	info := infoOf(r.Context())
	c := engine.Call{RequestID: info.id, Caller: event.Caller{
		RunID: r.Header.Get(HeaderRunID), NodeName: r.Header.Get(HeaderNodeName), ToolCallID: r.Header.Get(HeaderToolCallID)}}
	if field, ok := c.Caller.Valid(); !ok {
		writeProblem(w, r, problemOf(r, v1.Invalid("header "+field, "at most %d bytes of printable ASCII", event.MaxCallerLen)))
		return r, false
	}
	if info.identity != nil && s.auth.Enabled() {
		c.Owner = info.identity.Name
	}
	info.caller = c.Caller
	return r.WithContext(engine.WithCall(r.Context(), c)), true
}

// openSSE answers 200 with the headers of an event stream and returns
// send, which writes one piece of it (an event, a comment) within the
// write timeout and flushes it; false once the client is gone.
func (s *Server) openSSE(w http.ResponseWriter) (send func(format string, args ...any) bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return func(format string, args ...any) bool {
		rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
}

// eventFilter is GET /v1/events' query: every field given must match.
type eventFilter struct {
	event.Caller
	types   []string // exact types, or a prefix ending in "." ("session.")
	kind    string
	session string
	owner   string // "" for an admin: every token's events
}

func parseEventFilter(r *http.Request) (eventFilter, error) {
	q := r.URL.Query()
	f := eventFilter{Caller: event.Caller{RunID: q.Get("run_id"), NodeName: q.Get("node_name"), ToolCallID: q.Get("tool_call_id")},
		kind: q.Get("kind"), session: q.Get("session")}
	for k, vs := range q {
		switch k {
		case "run_id", "node_name", "tool_call_id", "type", "kind", "session":
		default:
			return f, v1.Invalid(k, "unknown query parameter (want run_id, node_name, tool_call_id, type, kind, session)")
		}
		if len(vs) > 1 {
			return f, v1.Invalid(k, "given more than once")
		}
	}
	if field, ok := f.Caller.Valid(); !ok {
		return f, v1.Invalid(field, "at most %d bytes of printable ASCII", event.MaxCallerLen)
	}
	if t := q.Get("type"); t != "" {
		f.types = strings.Split(t, ",")
		if len(f.types) > 16 {
			return f, v1.Invalid("type", "at most 16 types")
		}
	}
	return f, nil
}

func (f *eventFilter) match(e *event.Event) bool {
	switch {
	case f.owner != "" && e.Owner != f.owner,
		f.RunID != "" && e.RunID != f.RunID,
		f.NodeName != "" && e.NodeName != f.NodeName,
		f.ToolCallID != "" && e.ToolCallID != f.ToolCallID,
		f.kind != "" && e.Kind != f.kind,
		f.session != "" && e.Session != f.session:
		return false
	}
	return len(f.types) == 0 || slices.ContainsFunc(f.types, func(t string) bool {
		return t == e.Type || strings.HasSuffix(t, ".") && strings.HasPrefix(e.Type, t)
	})
}

// handleEvents is GET /v1/events: the engine's events as server-sent
// events (id: the event's seq, event: its type, data: the event as JSON)
// from now on, filtered by the query, a token's own only unless it is an
// admin token. A client that does not keep up loses events, never slows
// executions: each stream has a bounded queue (events.stream_buffer), and
// an "events.dropped" event says how many were lost so far. At most
// events.max_streams are open at once, events.max_streams_per_token of a
// non-admin token's, and events.admin_streams of them are kept for admin
// tokens (429 busy past a bound); a stream ends when the server starts to
// drain.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	f, err := parseEventFilter(r)
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	if id := infoOf(r.Context()).identity; s.auth.Enabled() && id != nil && !id.Admin {
		f.owner = id.Name
	}
	release, err := s.eventStreams.take(s.owner(infoOf(r.Context()).identity))
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	defer release()
	sub := s.opts.Engine.Events().Subscribe("sse", s.opts.EventBuffer, f.match)
	defer sub.Close()
	s.metrics.EventStream(1)
	defer s.metrics.EventStream(-1)

	send := s.openSSE(w)
	if !send(": execbox events\n\n") {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	var dropped uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.drain:
			return
		case <-tick.C:
			if !send(": keep-alive\n\n") {
				return
			}
		case e := <-sub.C():
			if d := sub.Dropped(); d != dropped {
				dropped = d
				b, _ := json.Marshal(event.Event{Type: event.Dropped, Time: time.Now(), Dropped: d})
				if !send("event: %s\ndata: %s\n\n", event.Dropped, b) {
					return
				}
			}
			b, err := json.Marshal(e)
			if err != nil || !send("id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b) {
				return
			}
		}
	}
}
