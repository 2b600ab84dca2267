package v1

import (
	"encoding/json"

	"github.com/execbox/execbox/sandbox"
)

// Tool is one tool (GET /v1/tools): its name, what it does, the JSON
// Schema of its arguments and where it comes from ("builtin" or a tools
// dir).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Source      string          `json:"source"`
}

// ToolProblem is a tool that was found but cannot be used (its module
// fails to load, its spec or schema is malformed); it hides any tool of
// the same name from an earlier source.
type ToolProblem struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Tools is GET /v1/tools' answer, sorted by name.
type Tools struct {
	Tools    []Tool        `json:"tools"`
	Problems []ToolProblem `json:"problems"`
}

// ToolRunRequest is the body of POST /v1/tools/{name}:run. Args are
// checked against the tool's schema before anything runs.
type ToolRunRequest struct {
	// Args is a JSON object; empty means {}.
	Args json.RawMessage `json:"args,omitempty"`
	// Files are written into the work dir first: relative path → content
	// (base64 in JSON), e.g. for read_file.
	Files map[string][]byte `json:"files,omitempty"`
	// Timeout is the call's time limit; zero means tools.timeout.
	Timeout Seconds `json:"timeout,omitzero"`
	// Limits bound the sandbox as a run's do (wall and output are the
	// call's own: Timeout and the protocol's bound).
	Limits sandbox.Limits `json:"limits,omitzero"`
	// Backend, Tier and MinIsolation say where the call may run, as a
	// RunRequest's do.
	Backend      string `json:"backend,omitempty"`
	Tier         string `json:"tier,omitempty"`
	MinIsolation string `json:"min_isolation,omitempty"`
}

// ToolError is a tool's own failure: an exception (tool_error, with its
// class and traceback) or a code the tool chose (network_disabled,
// file_not_found, …).
type ToolError struct {
	Code      string `json:"code"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

// ToolResult is the answer to a tool call that ran: OK with the tool's
// result, or not OK with its Error. A call that could not run is a
// problem instead.
type ToolResult struct {
	// ID is the call's id, as in the audit log.
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ToolError      `json:"error,omitempty"`
	// Output is what the tool printed (at most 64 KiB).
	Output          string             `json:"output,omitempty"`
	OutputTruncated bool               `json:"output_truncated,omitempty"`
	Artifacts       []sandbox.Artifact `json:"artifacts,omitempty"`
	Source          string             `json:"source"`
	Backend         string             `json:"backend"`
	Isolation       string             `json:"isolation"`
	DurationMS      int64              `json:"duration_ms"`
	Usage           sandbox.Usage      `json:"usage"`
}
