package mcpserver

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// The session tools: a sandbox kept across calls, as an agent keeps state
// across turns. Each goes through the API's /v1/sessions routes.

// SessionOpenInput is session_open's input.
type SessionOpenInput struct {
	IdleTimeout float64           `json:"idle_timeout,omitempty" jsonschema:"seconds the session may go unused before it is closed; 0 is the server's default (10 min)"`
	TTL         float64           `json:"ttl,omitempty" jsonschema:"the session's lifetime in seconds; 0 is the server's default (30 min)"`
	Files       map[string]string `json:"files,omitempty" jsonschema:"files written into the work dir first: relative path to text content"`
	Labels      map[string]string `json:"labels,omitempty" jsonschema:"labels to find the session by (key to value), shown when sessions are listed"`
	Selection
	Image
}

// SessionOutput describes an open session.
type SessionOutput struct {
	SessionID string    `json:"session_id" jsonschema:"the session's id, for the other session tools"`
	Backend   string    `json:"backend"`
	Isolation string    `json:"isolation"`
	Expires   time.Time `json:"expires" jsonschema:"when the session ends whatever it does"`
}

// SessionExecInput is session_exec's input.
type SessionExecInput struct {
	SessionID string   `json:"session_id" jsonschema:"the session, as session_open answered"`
	Command   []string `json:"command,omitempty" jsonschema:"the program and its arguments (argv, no shell); give command or code"`
	Code      string   `json:"code,omitempty" jsonschema:"source run with the language's interpreter"`
	Language  string   `json:"language,omitempty" jsonschema:"python (default), javascript, sh or bash"`
	Stdin     string   `json:"stdin,omitempty" jsonschema:"text fed to the program's stdin"`
	Dir       string   `json:"dir,omitempty" jsonschema:"the working directory, relative to the work dir"`
	Timeout   float64  `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds; 0 is the session's"`
}

// SessionCodeInput is session_run_code's input.
type SessionCodeInput struct {
	SessionID string  `json:"session_id" jsonschema:"the session, as session_open answered"`
	Code      string  `json:"code" jsonschema:"code to run; the value of its last expression is returned"`
	Language  string  `json:"language,omitempty" jsonschema:"python (default) or javascript"`
	ContextID string  `json:"context_id,omitempty" jsonschema:"the context to run in; empty is the session's first live context of the language (made if there is none)"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds; 0 is the session's wall limit. At the timeout the call is interrupted and the context keeps its state"`
}

// CodeOutput is session_run_code's answer.
type CodeOutput struct {
	ContextID string `json:"context_id"`
	OK        bool   `json:"ok"`
	Value     any    `json:"value,omitempty" jsonschema:"the last expression's value, when JSON can carry it"`
	Repr      string `json:"repr,omitempty"`
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	// StdoutTruncated and StderrTruncated: the stream was longer.
	StdoutTruncated bool          `json:"stdout_truncated,omitempty"`
	StderrTruncated bool          `json:"stderr_truncated,omitempty"`
	Error           *v1.CodeError `json:"error,omitempty"`
	// Lost: the context did not survive; the next call makes a new one.
	Lost bool `json:"lost,omitempty"`
}

// SessionIDInput names a session.
type SessionIDInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, as session_open answered"`
}

// SessionFileInput names a file of a session.
type SessionFileInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, as session_open answered"`
	Path      string `json:"path" jsonschema:"relative to the work dir"`
}

// SessionWriteInput is session_write_file's input.
type SessionWriteInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, as session_open answered"`
	Path      string `json:"path" jsonschema:"relative to the work dir; missing directories are created"`
	Content   string `json:"content" jsonschema:"the file's text"`
}

// SessionListInput is session_list_files' input.
type SessionListInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, as session_open answered"`
	Dir       string `json:"dir,omitempty" jsonschema:"relative to the work dir; empty is the work dir"`
}

// FileOutput describes a file.
type FileOutput struct {
	Path    string `json:"path"`
	Type    string `json:"type" jsonschema:"file, dir, symlink or other"`
	Size    int64  `json:"size"`
	Content string `json:"content,omitempty" jsonschema:"the text read, for session_read_file"`
	// Truncated says the content is the file's first bytes only.
	Truncated bool `json:"truncated,omitempty"`
}

// ListOutput is session_list_files' answer.
type ListOutput struct {
	Entries   []FileOutput `json:"entries"`
	Truncated bool         `json:"truncated,omitempty"`
}

// ClosedOutput is session_close's answer.
type ClosedOutput struct {
	Closed bool `json:"closed"`
}

func addSessionTools(s *mcp.Server, t *tools) {
	addTool(s, "SessionRequest", &mcp.Tool{Name: "session_open", Description: "Open a session: a sandbox that keeps its files across session_exec calls " +
		"(no network, a read-only root, the work dir /work). It closes after idle_timeout unused, at its ttl, or with session_close."}, t.sessionOpen)
	addTool(s, "SessionExec", &mcp.Tool{Name: "session_exec", Description: "Run a program or code in an open session's work dir; " +
		"files written by earlier calls are there. Returns its exit code, the reason it ended and its output."}, t.sessionExec)
	addTool(s, "ContextRequest", &mcp.Tool{Name: "session_run_code", Description: "Run Python (or JavaScript) in an interpreter context of a session, " +
		"like a notebook cell: variables, imports and definitions stay for the next call. Returns the last expression's value, " +
		"what the code printed, and the error with its traceback if it raised."}, t.sessionRunCode)
	addTool(s, "FileInfo", &mcp.Tool{Name: "session_write_file", Description: "Write a text file into a session's work dir."}, t.sessionWrite)
	addTool(s, "FileInfo", &mcp.Tool{Name: "session_read_file", Description: "Read a text file of a session's work dir (its first 32 KiB)."}, t.sessionRead)
	addTool(s, "FileList", &mcp.Tool{Name: "session_list_files", Description: "List a directory of a session's work dir."}, t.sessionList)
	addTool(s, "Session", &mcp.Tool{Name: "session_close", Description: "Close a session: its processes end and its files are gone."}, t.sessionClose)
}

func (t *tools) sessionOpen(ctx context.Context, req *mcp.CallToolRequest, in SessionOpenInput) (*mcp.CallToolResult, SessionOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, SessionOutput{}, toolError(err)
	}
	s, err := c.CreateSession(ctx, &v1.SessionRequest{TTL: v1.Seconds(seconds(in.TTL)), IdleTimeout: v1.Seconds(seconds(in.IdleTimeout)),
		Files: files(in.Files), Labels: in.Labels, Backend: in.Backend, Tier: in.Tier, MinIsolation: in.MinIsolation, Image: in.Image.Image})
	if err != nil {
		return nil, SessionOutput{}, toolError(err)
	}
	return nil, SessionOutput{SessionID: s.ID, Backend: s.Backend, Isolation: s.Isolation, Expires: s.Expires}, nil
}

func (t *tools) sessionExec(ctx context.Context, req *mcp.CallToolRequest, in SessionExecInput) (*mcp.CallToolResult, RunOutput, error) {
	out := newOutput(t.o.MaxText)
	c, err := t.client(req, out)
	if err != nil {
		return nil, RunOutput{}, toolError(err)
	}
	defer progress(ctx, req)()
	res, err := c.Exec(ctx, in.SessionID, &v1.SessionExec{Command: in.Command, Code: in.Code, Language: in.Language,
		Stdin: in.Stdin, Dir: in.Dir, Timeout: v1.Seconds(seconds(in.Timeout))})
	if err != nil {
		return nil, RunOutput{}, toolError(err)
	}
	return nil, runOutput(res, out), nil
}

func (t *tools) sessionRunCode(ctx context.Context, req *mcp.CallToolRequest, in SessionCodeInput) (*mcp.CallToolResult, CodeOutput, error) {
	// What the code printed is taken from the answer as it streams, as
	// for session_exec, never held whole.
	text := newOutput(t.o.MaxText)
	c, err := t.client(req, text)
	if err != nil {
		return nil, CodeOutput{}, toolError(err)
	}
	defer progress(ctx, req)()
	lang := cmp.Or(in.Language, "python")
	id := in.ContextID
	if id == "" {
		list, err := c.Contexts(ctx, in.SessionID)
		if err != nil {
			return nil, CodeOutput{}, toolError(err)
		}
		for _, x := range list {
			if x.Language == lang && x.Lost == "" {
				id = x.ID
				break
			}
		}
	}
	if id == "" {
		cx, err := c.CreateContext(ctx, in.SessionID, lang)
		if err != nil {
			return nil, CodeOutput{}, toolError(err)
		}
		id = cx.ID
	}
	res, err := c.RunCode(ctx, in.SessionID, id, &v1.CodeRequest{Code: in.Code, Timeout: v1.Seconds(seconds(in.Timeout))})
	if err != nil {
		return nil, CodeOutput{}, toolError(err)
	}
	out := CodeOutput{ContextID: id, OK: res.OK, Repr: res.Repr, Error: res.Error, Lost: res.Lost}
	var cut bool
	out.Stdout, cut = text.stdout.String()
	out.StdoutTruncated = res.StdoutTruncated || cut
	out.Stderr, cut = text.stderr.String()
	out.StderrTruncated = res.StderrTruncated || cut
	if len(res.Value) > 0 {
		out.Value = res.Value // as it is: the server made it
	}
	return nil, out, nil
}

func (t *tools) sessionWrite(ctx context.Context, req *mcp.CallToolRequest, in SessionWriteInput) (*mcp.CallToolResult, FileOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, FileOutput{}, toolError(err)
	}
	fi, err := c.PutFile(ctx, in.SessionID, in.Path, strings.NewReader(in.Content))
	if err != nil {
		return nil, FileOutput{}, toolError(err)
	}
	return nil, FileOutput{Path: fi.Path, Type: fi.Type, Size: fi.Size}, nil
}

func (t *tools) sessionRead(ctx context.Context, req *mcp.CallToolRequest, in SessionFileInput) (*mcp.CallToolResult, FileOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, FileOutput{}, toolError(err)
	}
	data, size, err := c.ReadFile(ctx, in.SessionID, in.Path, int64(t.o.MaxText))
	if err != nil {
		return nil, FileOutput{}, toolError(err)
	}
	out := FileOutput{Path: in.Path, Type: sandbox.FileRegular, Size: size, Truncated: size > int64(len(data))}
	var cut bool
	out.Content, cut = t.text(string(data))
	out.Truncated = out.Truncated || cut
	return nil, out, nil
}

func (t *tools) sessionList(ctx context.Context, req *mcp.CallToolRequest, in SessionListInput) (*mcp.CallToolResult, ListOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, ListOutput{}, toolError(err)
	}
	l, err := c.List(ctx, in.SessionID, in.Dir)
	if err != nil {
		return nil, ListOutput{}, toolError(err)
	}
	out := ListOutput{Entries: []FileOutput{}, Truncated: l.Truncated}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, FileOutput{Path: e.Path, Type: e.Type, Size: e.Size})
	}
	return nil, out, nil
}

func (t *tools) sessionClose(ctx context.Context, req *mcp.CallToolRequest, in SessionIDInput) (*mcp.CallToolResult, ClosedOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, ClosedOutput{}, toolError(err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.CloseSession(ctx, in.SessionID); err != nil {
		return nil, ClosedOutput{}, toolError(err)
	}
	return nil, ClosedOutput{Closed: true}, nil
}
