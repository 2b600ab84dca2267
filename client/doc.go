// Package client is the Go client of execbox's HTTP API v1 (`execbox
// serve`). It speaks the wire types of api/v1; a failure the server
// answers is a *v1.Problem, which unwraps to a *sandbox.Error, so
//
//	errors.Is(err, sandbox.ErrBusy)   // 429: retry after Problem.RetryAfter
//	sandbox.CodeOf(err)               // the stable code, e.g. "input_too_large"
//
// work as they do on the server. A function call whose code ran and failed
// is not an error: it is a FunctionResponse with OK false.
//
// The package depends on api/v1, the contract's leaf packages (sandbox,
// errmap) and the standard library only: a program that calls a server
// does not link the engine, the backends or a YAML decoder
// (internal/deptest).
//
// A Client is safe for concurrent use. It holds no state besides its
// http.Client; its context arguments bound each call (a run's wall limit
// is the server's to enforce; cancelling the context cancels the run).
package client
