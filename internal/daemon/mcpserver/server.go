package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/strictjson"
	"github.com/execbox/execbox/sandbox"
)

// DefaultMaxText is how much of each output stream a tool result carries
// unless Options.MaxText says otherwise.
const DefaultMaxText = 32 * 1024

// Options configure the MCP server.
type Options struct {
	// API is the HTTP API's handler (server.Server.Handler) every call goes
	// through in-process.
	API http.Handler
	// Version is execbox's version, told to clients.
	Version string
	// MaxText bounds stdout and stderr in a tool result; 0 is DefaultMaxText.
	MaxText int
}

// New returns the MCP server with execbox's tools.
func New(o Options) *mcp.Server {
	if o.MaxText <= 0 {
		o.MaxText = DefaultMaxText
	}
	t := &tools{o: o}
	s := mcp.NewServer(&mcp.Implementation{Name: "execbox", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Run untrusted code in an isolated, resource-limited sandbox: run_code for a snippet, " +
			"run_command for a program, execute_function for a function called with JSON parameters, lint to check code without running it; " +
			"session_open and session_exec to keep files across calls (session_write_file, session_read_file, session_list_files, session_close), " +
			"session_run_code to keep Python or JavaScript state across calls like a notebook; " +
			"list_tools and run_tool for the server's tools (python, read_file, write_file, http_fetch and its configured ones).",
	})
	addTool(s, "RunRequest", &mcp.Tool{Name: "run_command", Description: "Run a program (argv, no shell) in a fresh sandbox: " +
		"no network, a read-only root, the work dir /work. Returns its exit code, the reason it ended and its output."}, t.runCommand)
	addTool(s, "RunRequest", &mcp.Tool{Name: "run_code", Description: "Run source code (python, javascript, sh or bash) in a fresh sandbox. " +
		"Returns its exit code, the reason it ended and its output."}, t.runCode)
	addTool(s, "FunctionRequest", &mcp.Tool{Name: "execute_function", Description: "Call a function in a fresh sandbox: code defining it, " +
		"params as a JSON object of its arguments. Returns the function's return value (data) or its error with code and traceback, and what it printed."}, t.executeFunction)
	addTool(s, "FunctionRequest", &mcp.Tool{Name: "lint", Description: "Check code (python or javascript) for syntax errors without running it. " +
		"Returns diagnostics with 1-based lines and 0-based columns; none means valid."}, t.lint)
	addSessionTools(s, t)
	addToolTools(s, t)
	s.AddReceivingMiddleware(strictArguments)
	return s
}

// strictArguments refuses a tool call whose arguments give a key twice
// (or nest too deep), as the API refuses such a body: the SDK would keep
// one of them.
func strictArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			if err := strictjson.Check(call.Params.Arguments, nil); err != nil {
				res := &mcp.CallToolResult{}
				res.SetError(fmt.Errorf("%s: %w", v1.CodeInvalidRequest, err))
				return res, nil
			}
		}
		return next(ctx, method, req)
	}
}

// HTTPHandler serves s over streamable HTTP, stateless: no session is
// kept between requests, so nothing a client sends outlives its request.
// The caller authenticates and checks Host and Origin before it.
func HTTPHandler(s *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
}

// Selection says where a call may run.
type Selection struct {
	Backend      string `json:"backend,omitempty" jsonschema:"a backend by name; empty lets execbox choose"`
	Tier         string `json:"tier,omitempty" jsonschema:"fast, standard or strict; empty is the server's default"`
	MinIsolation string `json:"min_isolation,omitempty" jsonschema:"the weakest isolation accepted: process, kernel or vm"`
}

// Image names a root filesystem.
type Image struct {
	Image string `json:"image,omitempty" jsonschema:"the root filesystem: an image of the server's store (execbox image ls); empty is the host's view"`
}

// RunCommandInput is run_command's input.
type RunCommandInput struct {
	Command []string          `json:"command" jsonschema:"the program and its arguments (argv, no shell)"`
	Stdin   string            `json:"stdin,omitempty" jsonschema:"text fed to the program's stdin"`
	Files   map[string]string `json:"files,omitempty" jsonschema:"files written into the work dir first: relative path to text content"`
	Timeout float64           `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds; 0 is the server's default"`
	Selection
	Image
}

// RunCodeInput is run_code's input.
type RunCodeInput struct {
	Language string            `json:"language,omitempty" jsonschema:"python (default), javascript, sh or bash"`
	Code     string            `json:"code" jsonschema:"the program's source"`
	Stdin    string            `json:"stdin,omitempty" jsonschema:"text fed to the program's stdin"`
	Files    map[string]string `json:"files,omitempty" jsonschema:"files written into the work dir first: relative path to text content"`
	Timeout  float64           `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds; 0 is the server's default"`
	Selection
	Image
}

// RunOutput is what run_command and run_code return.
type RunOutput struct {
	ExitCode        int    `json:"exit_code" jsonschema:"the program's exit code; -1 when a signal ended it"`
	Reason          string `json:"reason" jsonschema:"why it ended: exited, timeout, memory_limit, pids_limit, output_limit, signaled, canceled, ..."`
	Signal          string `json:"signal,omitempty"`
	Message         string `json:"message,omitempty" jsonschema:"what ended it, when a limit or execbox did"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
	Backend         string `json:"backend"`
	Isolation       string `json:"isolation"`
}

// FunctionInput is execute_function's input.
type FunctionInput struct {
	Code       string         `json:"code" jsonschema:"the function's source"`
	Language   string         `json:"language,omitempty" jsonschema:"python (default) or javascript"`
	Params     map[string]any `json:"params,omitempty" jsonschema:"the function's arguments by name"`
	Entrypoint string         `json:"entrypoint,omitempty" jsonschema:"the function to call; empty is the last top-level one"`
	Timeout    float64        `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds, 1 to 60; 0 is the server's default"`
	Selection
}

// FunctionOutput is what execute_function returns.
type FunctionOutput struct {
	OK              bool   `json:"ok"`
	Data            any    `json:"data,omitempty" jsonschema:"the return value, when ok"`
	Error           string `json:"error,omitempty"`
	Code            string `json:"code,omitempty" jsonschema:"the stable error code, when not ok"`
	Type            string `json:"type,omitempty" jsonschema:"the exception's class, for user_error"`
	Traceback       string `json:"traceback,omitempty"`
	Stdout          string `json:"stdout,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
	Backend         string `json:"backend,omitempty"`
	Isolation       string `json:"isolation,omitempty"`
}

// LintInput is lint's input.
type LintInput struct {
	Code     string `json:"code" jsonschema:"the source to check"`
	Language string `json:"language,omitempty" jsonschema:"python (default) or javascript"`
}

// LintOutput is what lint returns.
type LintOutput struct {
	Diagnostics []v1.Diagnostic `json:"diagnostics"`
}

type tools struct{ o Options }

// client is the Go client over the API's handler, in-process, with the
// caller's Authorization header when the call came over HTTP with one.
// out, when set, takes the output of a run's answer (see lean): only a
// run's or an exec's call passes it.
func (t *tools) client(req *mcp.CallToolRequest, out *output) (*client.Client, error) {
	tr := inProcess{h: t.o.API, out: out}
	if req.Extra != nil && req.Extra.Header != nil {
		tr.auth = req.Extra.Header.Get("Authorization")
	}
	return client.New("http://localhost", client.WithHTTPClient(&http.Client{Transport: tr}))
}

func (t *tools) runCommand(ctx context.Context, req *mcp.CallToolRequest, in RunCommandInput) (*mcp.CallToolResult, RunOutput, error) {
	return t.run(ctx, req, &v1.RunRequest{Command: in.Command, Stdin: in.Stdin, Files: files(in.Files),
		Limits: sandbox.Limits{Wall: seconds(in.Timeout)}, Backend: in.Backend, Tier: in.Tier, MinIsolation: in.MinIsolation, Image: in.Image.Image})
}

func (t *tools) runCode(ctx context.Context, req *mcp.CallToolRequest, in RunCodeInput) (*mcp.CallToolResult, RunOutput, error) {
	return t.run(ctx, req, &v1.RunRequest{Code: in.Code, Language: in.Language, Stdin: in.Stdin, Files: files(in.Files),
		Limits: sandbox.Limits{Wall: seconds(in.Timeout)}, Backend: in.Backend, Tier: in.Tier, MinIsolation: in.MinIsolation, Image: in.Image.Image})
}

func (t *tools) run(ctx context.Context, req *mcp.CallToolRequest, r *v1.RunRequest) (*mcp.CallToolResult, RunOutput, error) {
	out := newOutput(t.o.MaxText)
	c, err := t.client(req, out)
	if err != nil {
		return nil, RunOutput{}, toolError(err)
	}
	defer progress(ctx, req)()
	res, err := c.Run(ctx, r)
	if err != nil {
		return nil, RunOutput{}, toolError(err)
	}
	return nil, runOutput(res, out), nil
}

// runOutput is a run's result for the model, its output out's.
func runOutput(res *v1.RunResult, out *output) RunOutput {
	o := RunOutput{ExitCode: res.ExitCode, Reason: string(res.Reason), Signal: res.Signal, Message: res.Message,
		DurationMS: res.Usage.Wall.Milliseconds(), Backend: res.Backend, Isolation: res.Isolation.String()}
	var cut bool
	o.Stdout, cut = out.stdout.String()
	o.StdoutTruncated = res.StdoutTruncated || cut
	o.Stderr, cut = out.stderr.String()
	o.StderrTruncated = res.StderrTruncated || cut
	return o
}

func (t *tools) executeFunction(ctx context.Context, req *mcp.CallToolRequest, in FunctionInput) (*mcp.CallToolResult, FunctionOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, FunctionOutput{}, toolError(err)
	}
	fr := &v1.FunctionRequest{Code: in.Code, Language: in.Language, Entrypoint: in.Entrypoint, Timeout: seconds(in.Timeout),
		Backend: in.Backend, Tier: in.Tier, MinIsolation: in.MinIsolation}
	if in.Params != nil {
		if fr.Params, err = json.Marshal(in.Params); err != nil {
			return nil, FunctionOutput{}, toolError(err)
		}
	}
	defer progress(ctx, req)()
	resp, err := c.Execute(ctx, fr)
	if err != nil {
		return nil, FunctionOutput{}, toolError(err)
	}
	out := FunctionOutput{OK: resp.OK, Error: resp.Error, Code: resp.Code, Type: resp.Type, Traceback: resp.Traceback,
		StdoutTruncated: resp.StdoutTruncated, DurationMS: resp.DurationMS, Backend: resp.Backend, Isolation: resp.Isolation}
	if resp.OK && len(resp.Data) > 0 {
		if err := json.Unmarshal(resp.Data, &out.Data); err != nil {
			return nil, FunctionOutput{}, toolError(err)
		}
	}
	var cut bool
	out.Stdout, cut = t.text(resp.Stdout)
	out.StdoutTruncated = out.StdoutTruncated || cut
	if !resp.OK {
		// The function ran and failed: a result the model reads, marked
		// as an error.
		return &mcp.CallToolResult{IsError: true}, out, nil
	}
	return nil, out, nil
}

func (t *tools) lint(ctx context.Context, req *mcp.CallToolRequest, in LintInput) (*mcp.CallToolResult, LintOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, LintOutput{}, toolError(err)
	}
	diags, err := c.Lint(ctx, &v1.FunctionRequest{Code: in.Code, Language: in.Language})
	if err != nil {
		return nil, LintOutput{}, toolError(err)
	}
	return nil, LintOutput{Diagnostics: diags}, nil
}

// text is s as text for the model (see type text): valid UTF-8, at most
// MaxText bytes; cut says it was shortened.
func (t *tools) text(s string) (_ string, cut bool) {
	x := text{max: t.o.MaxText}
	io.WriteString(&x, s)
	return x.String()
}

// toolError is an execbox error as the tool error's text: the stable code
// first, then what a person reads.
func toolError(err error) error {
	var p *v1.Problem
	if errors.As(err, &p) {
		return fmt.Errorf("%s: %s", p.Code, p.Detail)
	}
	if code := sandbox.CodeOf(err); code != "" {
		return fmt.Errorf("%s: %w", code, err)
	}
	return err
}

// progress sends a progress notification every second while a call runs,
// when the client asked for them (a progress token); the returned func
// stops it.
func progress(ctx context.Context, req *mcp.CallToolRequest) (stop func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		start := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				secs := time.Since(start).Seconds()
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: secs,
					Message: fmt.Sprintf("running for %.0f s", secs)})
			}
		}
	}()
	return func() { close(done) }
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func files(m map[string]string) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}
