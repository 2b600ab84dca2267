// Package server is execbox's HTTP API v1 (`execbox serve`): an adapter
// that turns JSON requests into engine calls and results into JSON. It
// holds no policy of its own: where code runs, with what isolation and
// limits, is the engine's decision; the function protocol is the function
// package's. The API's shapes are the wire types of api/v1, described by
// the OpenAPI document served at /v1/openapi.json (kept in YAML in api/v1,
// converted to JSON here). api/v1 imports neither the engine, the function
// package nor internal/daemon/audit: convert.go turns their types into wire types
// and back (the CLI uses the same conversions), each wire type encoding to
// exactly the JSON of the type it mirrors.
//
// Routes: POST /v1/runs (?stream=1 for NDJSON, or SSE with Accept:
// text/event-stream), POST /v1/functions:execute, POST /v1/functions:lint,
// GET /v1/health, GET /v1/backends, GET /v1/audit (admin tokens),
// GET /v1/openapi.json, GET /healthz, GET /readyz, GET /metrics (a token
// unless Options.PublicMetrics).
//
// The daemon is attack surface too (issue 22): a web page in the
// operator's browser and an unprivileged local user are attackers.
//
// Invariants:
//   - Every error is an RFC 9457 problem document (application/problem+json)
//     with the stable code; busy answers 429 with Retry-After, a body over
//     its bound 413, invalid input 400 naming the field.
//   - Bodies are bounded in size (server.max_body for runs, the function
//     protocol's 128 KiB for function calls) and in time (Options.
//     BodyTimeout, 408 past it; an upload's, which may be large, at least
//     at Options.MinBodyRate: each MinBodyRate × BodyTimeout bytes within
//     BodyTimeout of waiting, pace.go); a multipart part's headers at most
//     16 KiB, cut as they come; a stream's pending output is bounded by
//     the run's output limit. A body must be application/json (415, also
//     without a Content-Type) and is decoded strictly: exact keys, none
//     twice, nesting bounded (strict.go). A body the server does not read
//     (a refusal before it, a 401, a public route) is answered without
//     reading it; what of it has arrived is then discarded, and one that
//     does not come within a second closes the connection.
//   - Headers: at most Options.MaxHeaderBytes (431), within HeaderTimeout.
//   - Site (site.go): Host must be an IP address, localhost or an allowed
//     name (DNS rebinding); a request a page of another origin sent
//     (Origin, Sec-Fetch-Site) is refused unless its origin is allowed, and
//     CORS preflights are answered for allowed origins only. Every answer
//     carries nosniff, frame-denying, no-referrer, same-origin resource and
//     no-store headers.
//   - Playground (Options.Playground, package webui): GET and HEAD of a path
//     outside the API's (/v1, /healthz, /readyz, /metrics, /mcp) answer the
//     web playground's pages and assets, under the same site checks; an
//     unknown API path stays a JSON 404.
//   - Connections (conns.go): at most MaxConnections, and
//     MaxConnectionsPerAddress from one address; at a bound the oldest
//     connection not serving an authenticated request is closed for the
//     new one — a request whose body comes slower than MinBodyRate counts
//     as not served — so idle, unauthenticated and trickling connections
//     never keep an authenticated client out, and accept never runs out
//     of files.
//   - Answers have a write deadline from their first byte (WriteTimeout;
//     per event for streams), and a run's result is written chunk by chunk
//     (encodeStreaming), never escaped into a second copy.
//   - Problem details of 5xx answers never show host paths; an internal
//     error's detail points to the log, which has it. /readyz says only a
//     code; non-admin tokens see /v1/health and /v1/backends without the
//     backends' details, enforcement and reasons, and tools (their list, a
//     call's answer, a broken tools dir's problem) without the tools
//     dirs' host paths ("<path>").
//   - Every execution request that passes authentication — run, function,
//     lint, session exec, context call, terminal start and terminal input,
//     refused or not — leaves exactly one audit row and one metrics
//     observation before its answer is complete. Its code_sha256 hashes the
//     whole request; its code is kept only when it ran (terminal input
//     never: its row has the input's size and SHA-256). An upload (PUT
//     …/files/{path}, POST …/upload) leaves one row of kind session_upload
//     naming each file written by path, size and SHA-256. A failed
//     authentication (credentials that match no token) leaves a row of
//     kind auth with the remote address, and spends the address's failure
//     budget (auth.Check), past which it is answered 429 auth_throttled.
//   - Admission: the token's rate and in-flight limits before the body is
//     read; then, for runs, engine.Admit with the token as owner: a slot of
//     server.max_runs within the token's share and outside the admin
//     slots, and the result memory its limits allow (so a slow upload
//     holds none); the ticket is released only once the answer is written
//     (or the client left, or the write deadline passed). Function calls
//     pass the function executor's gate. Every execution in a session,
//     terminal input included, passes the guard and the token's budgets.
//     Uploads streaming in (server.max_uploads) and event streams open
//     (events.max_streams) are bounded as runs are: a share per non-admin
//     token and slots kept for admin tokens (shares.go), 429 past a
//     bound.
//   - Serve shuts down gracefully: /readyz turns false, requests keep being
//     served for the drain delay, the listener closes, in-flight requests
//     get the shutdown timeout to finish and are then cancelled (the engine
//     kills their process trees and closes their sandboxes); Serve returns
//     only after every handler has.
//
// Concurrency: a Server is safe for concurrent use; Serve runs once.
package server
