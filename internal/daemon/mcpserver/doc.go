// Package mcpserver serves execbox over the Model Context Protocol, with
// the official SDK (github.com/modelcontextprotocol/go-sdk): the tools
// run_command, run_code, execute_function and lint, and the session tools
// (session_open, session_exec, session_run_code, session_write_file,
// session_read_file, session_list_files, session_close) and the server's tools (list_tools,
// run_tool), for an agent's MCP host. `execbox
// mcp` serves them on stdin/stdout; `execbox serve` at POST /mcp
// (streamable HTTP, stateless: a session is the API's, named by its id in
// each call), behind the API's bearer token.
//
// It is an adapter and holds no policy: every tool call is an in-process
// request to the HTTP API's own handler (the Go client over a transport
// that calls the handler), with the MCP request's Authorization header as
// it came, so authentication, admission, limits, maximums, the guard,
// per-token shares and the audit log apply to it exactly as to /v1/runs
// and /v1/functions. An execbox error is a tool error (isError) whose text
// starts with the stable code; a program that failed is a result. Tool
// arguments that give a key twice are refused (invalid_request, naming
// the key), as the API refuses such a body (internal/strictjson).
//
// Memory: the handler's answer streams to the client through a pipe (the
// handler holds its run slot and result memory until the answer is read),
// and a run's answer is never held or decoded whole: its output is taken
// from it as it streams, keeping what fits an LLM's context (MaxText per
// stream, the truncation flags set; output.go). A call thus holds a few
// MaxText beyond what the API holds for the same request.
//
// While a call runs, a client that sent a progress token gets a progress
// notification every second; a cancelled call (the request's context)
// cancels the run.
package mcpserver
