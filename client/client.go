package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// maxAnswer bounds a non-streamed answer the client reads (a run's result
// carries its output and artifacts).
const maxAnswer = 256 * sandbox.MiB

// Client calls one execbox server.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token".
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a Client for the server at baseURL ("http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "url_invalid", "server URL %q: want http(s)://host:port", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// RunOption changes what a run's answer holds.
type RunOption func(url.Values)

// Explain asks for the per-limit enforcement explanation in the result
// (?explain=1); without it the result leaves that prose out.
func Explain() RunOption { return func(q url.Values) { q.Set("explain", "1") } }

func runQuery(opts []RunOption, q url.Values) url.Values {
	for _, o := range opts {
		o(q)
	}
	return q
}

// Run runs req and returns its result.
func (c *Client) Run(ctx context.Context, req *v1.RunRequest, opts ...RunOption) (*v1.RunResult, error) {
	var res v1.RunResult
	if err := c.do(ctx, http.MethodPost, "/v1/runs", runQuery(opts, url.Values{}), req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunStream runs req with ?stream=1, writing stdout and stderr chunks to
// the writers (nil: dropped) as they arrive, and returns the result.
func (c *Client) RunStream(ctx context.Context, req *v1.RunRequest, stdout, stderr io.Writer, opts ...RunOption) (*v1.RunResult, error) {
	return c.stream(ctx, "/v1/runs", req, stdout, stderr, opts)
}

// stream posts req to path with ?stream=1 and reads its events: output to
// the writers, then the result.
func (c *Client) stream(ctx context.Context, path string, req any, stdout, stderr io.Writer, opts []RunOption) (*v1.RunResult, error) {
	resp, err := c.send(ctx, http.MethodPost, path, runQuery(opts, url.Values{"stream": {"1"}}), req, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res *v1.RunResult
	var perr error
	err = v1.ReadEvents(resp.Body, func(ev *v1.StreamEvent) error {
		var w io.Writer
		switch ev.Type {
		case v1.EventStdout:
			w = stdout
		case v1.EventStderr:
			w = stderr
		case v1.EventResult:
			res = ev.Result
		case v1.EventError:
			perr = ev.Error
		}
		if w != nil {
			if _, err := w.Write(ev.Bytes()); err != nil {
				return fmt.Errorf("writing the run's output: %w", err)
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, sandbox.Errorf(sandbox.ErrInternal, "stream_failed", "reading the run's stream: %w", err)
	case perr != nil:
		return nil, perr
	case res == nil:
		return nil, sandbox.Errorf(sandbox.ErrInternal, "stream_failed", "the run's stream ended without a result")
	}
	return res, nil
}

// Execute calls a function. A response with OK false whose code ran and
// failed (v1.Ran) is returned with a nil error; other failures are
// errors (*v1.Problem).
func (c *Client) Execute(ctx context.Context, req *v1.FunctionRequest) (*v1.FunctionResponse, error) {
	var resp v1.FunctionResponse
	if err := c.do(ctx, http.MethodPost, "/v1/functions:execute", nil, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Lint parses req.Code without running it and returns its diagnostics.
func (c *Client) Lint(ctx context.Context, req *v1.FunctionRequest) ([]v1.Diagnostic, error) {
	var resp v1.FunctionResponse
	if err := c.do(ctx, http.MethodPost, "/v1/functions:lint", nil, req, &resp); err != nil {
		return nil, err
	}
	if err := resp.Err(); err != nil {
		return nil, err
	}
	if resp.Diagnostics == nil {
		return []v1.Diagnostic{}, nil
	}
	return resp.Diagnostics, nil
}

// Health returns the server's selection report.
func (c *Client) Health(ctx context.Context) (*v1.Health, error) {
	var h v1.Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Backends lists the server's backends.
func (c *Client) Backends(ctx context.Context) ([]v1.Backend, error) {
	var b v1.Backends
	if err := c.do(ctx, http.MethodGet, "/v1/backends", nil, nil, &b); err != nil {
		return nil, err
	}
	return b.Backends, nil
}

// Audit queries the audit log (admin tokens).
func (c *Client) Audit(ctx context.Context, q v1.AuditQuery) (*v1.Audit, error) {
	var a v1.Audit
	if err := c.do(ctx, http.MethodGet, "/v1/audit", q.Values(), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Ready returns nil when the server is ready (/readyz), else why not.
func (c *Client) Ready(ctx context.Context) error {
	var st v1.Status
	err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, &st)
	if err != nil {
		return err
	}
	return nil
}

// do sends body as JSON and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "answer_invalid", "decoding the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// send makes the request with body as JSON; a non-2xx answer is returned
// as an error (a *v1.Problem) with the body closed.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body any, accept string) (*http.Response, error) {
	if body == nil {
		return c.sendRaw(ctx, method, path, q, nil, "", accept)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "request_invalid", "encoding the request: %w", err)
	}
	return c.sendRaw(ctx, method, path, q, bytes.NewReader(b), "application/json", accept)
}

// sendRaw is send with a body of contentType read from rd (nil: none).
// path is not escaped: each of its bytes stands for itself.
func (c *Client) sendRaw(ctx context.Context, method, path string, q url.Values, rd io.Reader, contentType, accept string) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawPath = ""
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "request_invalid", "making the request: %w", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	if cl, ok := ctx.Value(callerKey{}).(v1.Caller); ok {
		for h, v := range map[string]string{headerRunID: cl.RunID, headerNodeName: cl.NodeName, headerToolCallID: cl.ToolCallID} {
			if v != "" {
				req.Header.Set(h, v)
			}
		}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "interrupted", "%s %s: %w", method, path, err)
		}
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "server_unreachable", "%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readProblem(resp)
}

// readProblem turns a non-2xx answer into a *v1.Problem, whatever its body.
func readProblem(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*sandbox.KiB))
	p := &v1.Problem{}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == v1.ContentTypeProblem {
		if err := json.Unmarshal(b, p); err != nil {
			p = &v1.Problem{}
		}
	} else if mt == "application/json" {
		// /readyz answers its status document with 503.
		var st v1.Status
		if json.Unmarshal(b, &st) == nil && st.Reason != "" {
			p.Detail = st.Reason
		}
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	if p.Code == "" {
		p.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(resp.StatusCode)), " ", "_")
		if p.Code == "" {
			p.Code = "http_" + strconv.Itoa(resp.StatusCode)
		}
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.Detail == "" {
		p.Detail = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if p.Type == "" {
		p.Type = v1.ProblemTypePrefix + p.Code
	}
	if p.RetryAfter == 0 {
		p.RetryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
	}
	return p
}
