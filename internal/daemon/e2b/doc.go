// Package e2b is the wire of execbox's E2B-compatible surface: what the
// official E2B SDKs send and expect, written from the protocol as the SDKs
// speak it — the control API's JSON (sandboxes), the sandbox daemon's
// Connect services in their JSON form (process.Process,
// filesystem.Filesystem) and the code interpreter's NDJSON stream — plus
// the Connect codec that carries these plain Go types. It holds no
// behaviour: the server (internal/daemon/server) maps each call onto
// execbox's sessions, contexts and terminals.
package e2b
