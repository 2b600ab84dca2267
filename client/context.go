package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

func contextPath(id, ctxID string) string {
	return sessionPath(id) + "/contexts/" + url.PathEscape(ctxID)
}

func terminalPath(id, term string) string {
	return sessionPath(id) + "/terminals/" + url.PathEscape(term)
}

// CreateContext starts an interpreter context (language python, the
// default, or javascript) in session id: code run in it keeps its
// variables, imports and definitions for the next call.
func (c *Client) CreateContext(ctx context.Context, id, language string) (*v1.Context, error) {
	var out v1.Context
	return &out, c.do(ctx, http.MethodPost, sessionPath(id)+"/contexts", nil, v1.ContextRequest{Language: language}, &out)
}

// Contexts lists session id's contexts.
func (c *Client) Contexts(ctx context.Context, id string) ([]v1.Context, error) {
	var out v1.Contexts
	return out.Contexts, c.do(ctx, http.MethodGet, sessionPath(id)+"/contexts", nil, nil, &out)
}

// RunCode runs code in context ctxID of session id. Code that raised is a
// result with OK false, not an error.
func (c *Client) RunCode(ctx context.Context, id, ctxID string, req *v1.CodeRequest) (*v1.CodeResult, error) {
	var out v1.CodeResult
	return &out, c.do(ctx, http.MethodPost, contextPath(id, ctxID)+"/run", nil, req, &out)
}

// ResetContext starts context ctxID afresh (its state is gone).
func (c *Client) ResetContext(ctx context.Context, id, ctxID string) (*v1.Context, error) {
	var out v1.Context
	return &out, c.do(ctx, http.MethodPost, contextPath(id, ctxID)+"/reset", nil, nil, &out)
}

// DeleteContext ends context ctxID.
func (c *Client) DeleteContext(ctx context.Context, id, ctxID string) error {
	return c.noContent(ctx, http.MethodDelete, contextPath(id, ctxID))
}

// OpenTerminal runs a program on a new terminal (a PTY) in session id.
func (c *Client) OpenTerminal(ctx context.Context, id string, req *v1.TerminalRequest) (*v1.Terminal, error) {
	var out v1.Terminal
	return &out, c.do(ctx, http.MethodPost, sessionPath(id)+"/terminals", nil, req, &out)
}

// Terminal describes terminal term of session id.
func (c *Client) Terminal(ctx context.Context, id, term string) (*v1.Terminal, error) {
	var out v1.Terminal
	return &out, c.do(ctx, http.MethodGet, terminalPath(id, term), nil, nil, &out)
}

// TerminalInput types data into terminal term, in requests of at most
// v1.MaxTerminalInput bytes.
func (c *Client) TerminalInput(ctx context.Context, id, term string, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), v1.MaxTerminalInput)
		resp, err := c.sendRaw(ctx, http.MethodPost, terminalPath(id, term)+"/input", nil, bytes.NewReader(data[:n]), "application/octet-stream", "application/json")
		if err != nil {
			return err
		}
		resp.Body.Close()
		data = data[n:]
	}
	return nil
}

// ResizeTerminal sets terminal term's size.
func (c *Client) ResizeTerminal(ctx context.Context, id, term string, rows, cols int) error {
	resp, err := c.send(ctx, http.MethodPost, terminalPath(id, term)+"/resize", nil, v1.TerminalResize{Rows: rows, Cols: cols}, "application/json")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// KillTerminal kills terminal term's program.
func (c *Client) KillTerminal(ctx context.Context, id, term string) error {
	return c.noContent(ctx, http.MethodDelete, terminalPath(id, term))
}

// TerminalOutput writes what terminal term shows to w as it comes, until
// its program ends (its exit is returned), ctx ends or the stream breaks.
// One reader at a time per terminal.
func (c *Client) TerminalOutput(ctx context.Context, id, term string, w io.Writer) (*v1.TerminalExit, error) {
	resp, err := c.sendRaw(ctx, http.MethodGet, terminalPath(id, term)+"/output", nil, nil, "", "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch event {
		case v1.TerminalEventOutput:
			var o v1.TerminalOutput
			if err := json.Unmarshal([]byte(data), &o); err != nil {
				return nil, sandbox.Errorf(sandbox.ErrInternal, "response_invalid", "terminal output: %w", err)
			}
			if _, err := w.Write(o.Data); err != nil {
				return nil, err
			}
		case v1.TerminalEventExit:
			var x v1.TerminalExit
			if err := json.Unmarshal([]byte(data), &x); err != nil {
				return nil, sandbox.Errorf(sandbox.ErrInternal, "response_invalid", "terminal exit: %w", err)
			}
			return &x, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "server_unreachable", "reading terminal output: %w", err)
	}
	return nil, sandbox.Errorf(sandbox.ErrUnavailable, "stream_ended", "the terminal's output stream ended before its program")
}
