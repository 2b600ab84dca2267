// Package server is execbox's HTTP API v1 (`execbox serve`): an adapter
// that turns JSON requests into engine calls and results into JSON. It
// holds no policy of its own: where code runs, with what isolation and
// limits, is the engine's decision; the function protocol is the function
// package's. The API's shapes are the wire types of api/v1, described by
// the OpenAPI document served at /v1/openapi.json (kept in YAML in api/v1,
// converted to JSON here). api/v1 imports neither the engine, the function
// package nor internal/audit: convert.go turns their types into wire types
// and back (the CLI uses the same conversions), each wire type encoding to
// exactly the JSON of the type it mirrors.
//
// Routes: POST /v1/runs (?stream=1 for NDJSON, or SSE with Accept:
// text/event-stream), POST /v1/functions:execute, POST /v1/functions:lint,
// GET /v1/health, GET /v1/backends, GET /v1/audit (admin tokens),
// GET /v1/openapi.json, GET /healthz, GET /readyz, GET /metrics.
//
// Invariants:
//   - Every error is an RFC 9457 problem document (application/problem+json)
//     with the stable code; busy answers 429 with Retry-After, a body over
//     its bound 413, invalid input 400 naming the field.
//   - Bodies are bounded in size (server.max_body for runs, the function
//     protocol's 128 KiB for function calls) and in time (Options.
//     BodyTimeout, 408 past it); a stream's pending output is bounded by
//     the run's output limit.
//   - Every execution request that passes authentication — run, function,
//     lint, refused or not — leaves exactly one audit row and one metrics
//     observation before its answer is complete.
//   - Admission: the token's rate and in-flight limits before the body is
//     read; then, for runs, a slot of server.max_runs (so a slow upload
//     holds none); function calls pass the function executor's gate.
//   - Serve shuts down gracefully: /readyz turns false, requests keep being
//     served for the drain delay, the listener closes, in-flight requests
//     get the shutdown timeout to finish and are then cancelled (the engine
//     kills their process trees and closes their sandboxes); Serve returns
//     only after every handler has.
//
// Concurrency: a Server is safe for concurrent use; Serve runs once.
package server
