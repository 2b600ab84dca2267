// Package engine decides where and how a request runs: it owns the
// backends, probes their health in the background, selects one per request
// (auto, a named backend, a tier, a minimum isolation, or off), applies the
// configured default limits and their maxima, and runs the request through
// the sandbox contract. Adapters (CLI, HTTP, MCP, the function executor)
// hold no policy; they hand the engine a Selection, a Spec and a Process.
//
// Selection rules (fail closed, never degrade silently):
//   - "off" refuses everything, tier requests included.
//   - "auto" takes the strongest backend that is available and ready
//     (vm > kernel > process), ties broken by the configured preference.
//     "local" (no isolation) is never picked by auto or by a tier.
//   - A named backend that is unavailable is an error, never a fallback.
//   - "local" runs only when it is named and allow_unisolated is set.
//   - Tiers: strict = the strongest, kernel or stronger; standard = the
//     strongest, process or stronger; fast = the fastest ready backend of at
//     least process level. A tier or a min_isolation can raise isolation
//     above the configured floor but never lower it.
//
// Every way in — a run (Plan, Admit, Ticket.Run), a call (Call), a
// session (OpenSession), Create — checks its spec in one step (checkSpec:
// the configured images, limits with their defaults and maxima, policy,
// the spec validated once) and the selected backend's capabilities in
// another (fits).
//
// Warm pools keep sandboxes of a PoolTemplate (a spec and a process that
// waits on its stdin for its call) per backend, each used by one Call.
// The engine knows nothing of what the templates run: the daemon gives it
// the function runners (package function runs through Engine.Call).
//
// Health is probed by really starting a sandbox (the backends' Health), off
// the request path: Start probes every backend at once and then on an
// interval; a request waits only for a backend that was never probed.
//
// # A session's files and this host's memory
//
// A session's work dir and /tmp are memory-backed and live as long as it
// does, and what is written into them is not always charged to the
// sandbox: on native, bwrap and gvisor the work dir is a tmpfs on the host
// that the server writes an upload into (Files.PutFile, WriteFiles), so
// its pages are charged to the server's memory cgroup (a program's own
// writes are charged to the program's); on docker an upload is written by
// a helper in the container but WriteFiles' archive by dockerd; local
// has no cgroup, nor a tmpfs (it does not enforce work_size). A microVM keeps them in RAM sized memory + work + tmp,
// a Pod in a limit of the same sum. So the engine holds each open
// session's work_size + tmp_size against one budget of this host's
// memory, SessionOptions.FileMemory (sessions.max_file_memory: built in
// half of the host's memory; the configuration refuses one beyond it),
// from before its sandbox is made until it is closed. A session that does
// not fit is refused (sessions_exhausted), and one unprivileged owner's
// sessions hold at most half. Every way a session's files are written
// then lands in what was held for it, since its limits size them (on
// every backend but local).
// Sessions of a Remote backend (kubernetes) hold none.
//
// Charging instead — every upload written by a helper in the sandbox's
// cgroup, as docker's are — would bound native, bwrap and gvisor, but not
// dockerd's archives nor local, and it makes a session's files count
// against its memory limit: memory 32m with work_size 1g would hold 32
// MiB of files, less what its programs use, and an upload past that
// would end in an OOM kill inside the sandbox. Holding the limits up front
// bounds every backend in one place, keeps work_size what microvm and
// kubernetes make it (room beside memory), and turns the worst case —
// every open session's files full — into a number the configuration is
// checked against.
//
// An Engine is safe for concurrent use.
package engine
