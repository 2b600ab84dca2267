// Package v1 holds the wire types of execbox's HTTP API v1, shared by the
// server (internal/daemon/server), the Go client (client) and the MCP adapter, and
// the OpenAPI 3.1 document that describes the API (OpenAPIYAML).
//
// The package is a leaf: it imports the standard library and the
// contract's leaf packages sandbox and errmap, nothing else — not the
// engine, the function package, a backend, an internal package or a YAML
// decoder — so a program that uses the Go client links none of them
// (client's TestDependencies holds both to it). Where a type of the
// contract is itself what travels (sandbox.Result, Usage, Limits in their
// JSON form) the wire uses it; every other shape has its own type here,
// with the same JSON as the type it mirrors, and internal/daemon/server converts.
//
// One concept a file: run.go (POST /v1/runs), stream.go (its streamed
// events), function.go (function calls and lints), health.go (health,
// backends, liveness), audit.go (the audit log and its query), problem.go
// (errors), openapi.go (the document).
//
// The types are plain data with JSON tags; their zero values are the
// strict, default request. Conversions to the sandbox contract
// (RunRequest.Build) only translate and check shape: what may run where
// is decided by the engine, never here.
//
// Errors travel as RFC 9457 problem documents (Problem) whose "code" is
// the stable machine code of a sandbox.Error or a function response; a
// Problem unwraps to a *sandbox.Error of the matching kind (errmap), so
// errors.Is, sandbox.CodeOf and errmap.ExitCode work on the client side
// too.
//
// Concurrency: the types hold no shared state; OpenAPIYAML is safe for
// concurrent use.
package v1
