// Package v1 holds the wire types of execbox's HTTP API v1, shared by the
// server (internal/server), the Go client (client) and the MCP adapter, and
// the OpenAPI 3.1 document that describes the API (OpenAPIYAML).
//
// The types are plain data with JSON tags; their zero values are the
// strict, default request. Conversions to the sandbox contract
// (RunRequest.Build) only translate and check shape: what may run where
// is decided by the engine, never here.
//
// Errors travel as RFC 9457 problem documents (Problem) whose "code" is
// the stable machine code of a sandbox.Error or a function.Response; a
// Problem unwraps to a *sandbox.Error of the matching kind, so errors.Is,
// sandbox.CodeOf and sandbox.ExitCode work on the client side too.
//
// Concurrency: the types hold no shared state; OpenAPIYAML is safe for
// concurrent use.
package v1
