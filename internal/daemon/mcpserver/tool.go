package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/execbox/execbox/api/v1"
)

// ListToolsOutput is what list_tools returns.
type ListToolsOutput struct {
	Tools []v1.Tool `json:"tools"`
}

// RunToolInput is run_tool's input.
type RunToolInput struct {
	Name    string            `json:"name" jsonschema:"the tool to run, as list_tools names it"`
	Args    map[string]any    `json:"args,omitempty" jsonschema:"the tool's arguments, matching its parameters schema"`
	Files   map[string]string `json:"files,omitempty" jsonschema:"files written into the work dir first: relative path to text content"`
	Timeout float64           `json:"timeout,omitempty" jsonschema:"time limit in seconds; 0 is the server's default"`
	Selection
}

// RunToolOutput is what run_tool returns.
type RunToolOutput struct {
	OK              bool          `json:"ok"`
	Result          any           `json:"result,omitempty" jsonschema:"the tool's return value, when ok"`
	Error           *v1.ToolError `json:"error,omitempty" jsonschema:"the tool's failure, when not ok"`
	Output          string        `json:"output,omitempty" jsonschema:"what the tool printed"`
	OutputTruncated bool          `json:"output_truncated,omitempty"`
	Backend         string        `json:"backend"`
	Isolation       string        `json:"isolation"`
}

func addToolTools(s *mcp.Server, t *tools) {
	addTool(s, "ToolRunRequest", &mcp.Tool{Name: "list_tools", Description: "List the execbox tools run_tool can run: name, description, " +
		"the JSON Schema of the arguments and where the tool comes from."}, t.listTools)
	addTool(s, "ToolRunRequest", &mcp.Tool{Name: "run_tool", Description: "Run an execbox tool (see list_tools) with JSON arguments in a fresh sandbox. " +
		"Returns its result, or its error with code and traceback, and what it printed."}, t.runTool)
}

func (t *tools) listTools(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ListToolsOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, ListToolsOutput{}, toolError(err)
	}
	list, err := c.Tools(ctx)
	if err != nil {
		return nil, ListToolsOutput{}, toolError(err)
	}
	return nil, ListToolsOutput{Tools: list.Tools}, nil
}

func (t *tools) runTool(ctx context.Context, req *mcp.CallToolRequest, in RunToolInput) (*mcp.CallToolResult, RunToolOutput, error) {
	c, err := t.client(req, nil)
	if err != nil {
		return nil, RunToolOutput{}, toolError(err)
	}
	tr := &v1.ToolRunRequest{Files: files(in.Files), Timeout: v1.Seconds(seconds(in.Timeout)),
		Backend: in.Backend, Tier: in.Tier, MinIsolation: in.MinIsolation}
	if in.Args != nil {
		if tr.Args, err = json.Marshal(in.Args); err != nil {
			return nil, RunToolOutput{}, toolError(err)
		}
	}
	defer progress(ctx, req)()
	res, err := c.RunTool(ctx, in.Name, tr)
	if err != nil {
		return nil, RunToolOutput{}, toolError(err)
	}
	out := RunToolOutput{OK: res.OK, Error: res.Error, OutputTruncated: res.OutputTruncated, Backend: res.Backend, Isolation: res.Isolation}
	if res.OK && len(res.Result) > 0 {
		if err := json.Unmarshal(res.Result, &out.Result); err != nil {
			return nil, RunToolOutput{}, toolError(err)
		}
	}
	var cut bool
	out.Output, cut = t.text(res.Output)
	out.OutputTruncated = out.OutputTruncated || cut
	if !res.OK {
		return &mcp.CallToolResult{IsError: true}, out, nil
	}
	return nil, out, nil
}
