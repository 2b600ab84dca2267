package server

import (
	"net/http"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
)

// handleMCP is POST /mcp: the MCP server (internal/daemon/mcpserver), whose tool
// calls come back into this API in-process. The body is bounded like any
// request's; the write deadline is lifted, since a tool call answers when
// its run ends (its own wall limit bounds it) and progress streams before.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	if s.mcp == nil {
		writeProblem(w, r, v1.ProblemFor(http.StatusNotFound, v1.CodeNotFound, "this server serves no MCP"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	s.mcp.ServeHTTP(w, r)
}
