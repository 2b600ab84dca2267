package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/execbox/execbox/internal/daemon/mcpserver"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/sandbox"
)

func newMCPCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve execbox's tools over the Model Context Protocol on stdin/stdout",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout, for an MCP
host (an agent, an editor) that starts it as a subprocess. Its tools:
run_command, run_code, execute_function, lint and the session tools
(session_open, session_exec, session_run_code, session_write_file,
session_read_file, session_list_files, session_close; a session lives as long as this
process at most), list_tools and run_tool (execbox's tools: python,
read_file, write_file, http_fetch and those of tools.dirs). Each call is
admitted, guarded (guard rules and budgets; confirm rules need execbox
serve), limited and audited as the HTTP API's calls are, with
the same configuration; the caller is the local user, so no token is
asked. Logs go to stderr. execbox serve offers the same tools at POST /mcp.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMCP(cmd.Context(), g) },
	}
}

func runMCP(ctx context.Context, g *globals) error {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(os.Stderr, cfg.Log)
	e, store, closeAll, err := startEngine(cfg, log)
	if err != nil {
		return err
	}
	defer closeAll()
	// The guard's rules and budgets hold here too; a confirmation needs
	// an admin on execbox serve's API, which this process does not offer.
	if r := cfg.Guard.Confirms(); r != "" {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "guard: %q holds calls for an admin's decision, which needs execbox serve; execbox mcp offers no API to decide them", r)
	}
	gd, tools, err := guardAndTools(cfg)
	if err != nil {
		return err
	}
	// The API in-process, with no token: stdin and stdout are the local
	// user's, and nothing listens.
	fx, err := newFunctions(cfg, e)
	if err != nil {
		return err
	}
	api, err := server.New(server.Options{Engine: e, Functions: fx, Audit: store, Logger: log, Guard: gd, Tools: tools,
		MaxBody: cfg.Server.MaxBody, FunctionTimeout: cfg.Functions.Timeout})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := mcpserver.New(mcpserver.Options{API: api.Handler(), Version: version})
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// mcpHandler is execbox serve's POST /mcp: the MCP tools over the API's
// own handler.
func mcpHandler(api http.Handler) http.Handler {
	return mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{API: api, Version: version}))
}
