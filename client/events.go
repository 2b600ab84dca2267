package client

import (
	"bufio"
	"context"
	"encoding/json"
	"net/url"
	"strings"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// The caller's headers (the server's HeaderRunID and the others).
const (
	headerRunID      = "X-Execbox-Run-Id"
	headerNodeName   = "X-Execbox-Node-Name"
	headerToolCallID = "X-Execbox-Tool-Call-Id"
)

type callerKey struct{}

// WithCaller returns ctx whose requests name the caller's run, node and
// tool call: every event of the executions they start carries them (and
// GET /v1/events filters by them).
func WithCaller(ctx context.Context, c v1.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// Events streams the server's events that match f (a token's own, unless
// it is an admin token) to fn, from now until ctx ends (nil is returned
// then), fn returns an error (returned), or the server ends the stream.
// A reader that does not keep up loses events: an event of type
// "events.dropped" says how many so far.
func (c *Client) Events(ctx context.Context, f v1.EventFilter, fn func(v1.Event) error) error {
	q := url.Values{}
	for k, v := range map[string]string{"run_id": f.RunID, "node_name": f.NodeName, "tool_call_id": f.ToolCallID,
		"kind": f.Kind, "session": f.Session, "type": strings.Join(f.Types, ",")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	resp, err := c.sendRaw(ctx, "GET", "/v1/events", q, nil, "", "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue // id:, event:, comments and the blank line between events
		}
		var e v1.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return sandbox.Errorf(sandbox.ErrInternal, "response_invalid", "an event: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return sandbox.Errorf(sandbox.ErrUnavailable, "server_unreachable", "reading events: %w", err)
	}
	return nil
}
