// Package config is execbox's configuration: one struct, read from the YAML
// file execbox.yaml, the environment and flags, with the source of every
// value recorded.
//
// Layers, each overriding the one before: Default, the file, EXECBOX_*
// variables, flags. Per-request values come last and are the engine's to
// apply, each at most its maximum under max_limits (built in: sized to the
// host, sandbox.HostMaxima). The default limits must lie within the
// maxima, server.max_result_memory must hold one run at the maxima, and
// sessions.max_file_memory one session at the maxima, within this host's
// memory (sandbox.HostMemory).
//
// Invariants:
//   - Strict: an unknown key in the file or in a flag is an error naming it
//     (with the file's line); a key that was replaced (limits.max_wall, now
//     max_limits.wall) is an error naming its replacement, in the
//     environment too; a value that does not parse is an error naming
//     the key and the file line, variable or flag. An EXECBOX_* variable that
//     names no key (and is none of the few non-key ones) is an error too,
//     never matched to a nearby key.
//   - One syntax everywhere: Set, the environment and flags parse the same
//     text (durations as ParseDuration, sizes as ParseSize, lists
//     comma-separated); the file adds YAML lists.
//   - Load returns only a validated Config; Provenance names the layer of
//     every key.
//   - Backends read their own sections through BackendSection, which hands
//     them the effective values, not the raw file.
//
// Concurrency: a Config is plain data; read it from any number of
// goroutines, but do not write it while others read. Load has no shared
// state.
package config
