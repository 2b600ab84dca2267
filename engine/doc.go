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
// Health is probed by really starting a sandbox (the backends' Health), off
// the request path: Start probes every backend at once and then on an
// interval; a request waits only for a backend that was never probed.
//
// An Engine is safe for concurrent use.
package engine
