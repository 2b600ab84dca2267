// Package hostbase is the core the backends share whose sandboxes live on
// this host under execbox's own cgroups and work dirs (native, bwrap,
// gvisor; local uses its work-dir part). A backend keeps only what differs —
// how it launches a sandbox and runs a program in it — and embeds the rest:
//
//   - Backend: the host probe (Host: what was found out about this host,
//     cgroups and this process's base dir under the work root among it),
//     the enforcement table, one health-cache rule, Capabilities,
//     Reconcile and Close.
//   - Sandbox: a sandbox's directory, cgroup (with Options.ProgramLeaf a
//     pids leaf that holds the program alone, to its limit exactly) and
//     work dir (a tmpfs of Limits.WorkSize as root), made with undo on
//     error and removed by Close; the Result's enforcement and cgroup
//     accounting; InitResult, which turns an init's report into a Result
//     (exit 127/126 for a program that cannot start).
//   - WorkSandbox, which Sandbox embeds: the id, the operation lifecycle,
//     WriteFiles, Artifacts and the preamble of every Exec.
//
// # Health and the host probe
//
// The host is probed on first use. A backend's TTL says for how long an
// answer is reused: a Health answer is kept for TTL (TTL 0: forever), and a
// probe that found the host unusable is repeated once TTL has passed (a
// binary may be installed later; TTL 0: never). An answer given while the
// caller's context had ended is not kept.
//
// # Invariants
//
//   - A Sandbox is made completely or not at all: every step of NewSandbox
//     is undone when a later one fails (internal/host/cleanup), and a backend
//     undoes its own later steps with Close.
//   - Close removes everything of a sandbox: the backend's OnClose steps
//     first (newest first), then the cgroup (its processes killed), the
//     work dir's tmpfs, the work dir, and the sandbox's directory with any
//     mount left in it (never emptying a host bind).
//   - After Backend.Close no new sandbox is made: Create is ErrUnavailable.
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is too, as package
// sandbox says: one Exec at a time (a second gets ErrBusy "sandbox_busy",
// from sandbox.Lifecycle), WriteFiles and Artifacts at any time (one after
// the other, alongside an Exec), and Close at any time, ending a running
// Exec.
package hostbase
