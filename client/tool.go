package client

import (
	"context"
	"net/http"
	"net/url"

	v1 "github.com/execbox/execbox/api/v1"
)

// Tools lists the server's tools, and those it found broken.
func (c *Client) Tools(ctx context.Context) (*v1.Tools, error) {
	var t v1.Tools
	if err := c.do(ctx, http.MethodGet, "/v1/tools", nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// RunTool runs the tool name with req's arguments. A tool that ran and
// failed is a result with OK false; a call refused before it ran
// (tool_not_found, tool_args_invalid, a guard's refusal, …) is an error.
func (c *Client) RunTool(ctx context.Context, name string, req *v1.ToolRunRequest) (*v1.ToolResult, error) {
	var r v1.ToolResult
	if err := c.do(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(name)+":run", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
