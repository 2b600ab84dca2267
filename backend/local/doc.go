// Package local is the backend with no isolation: the program is a plain
// host subprocess (isolation level "none"). It exists for development and
// for trusted tools, and the engine uses it only when it is named and
// allow_unisolated is set.
//
// What it still guarantees: a private work dir and TMPDIR removed afterwards,
// the environment allowlist, rlimits (data size for memory, file size, open
// files, CPU time; processes only with run_as_user), the wall-clock limit
// and output caps, and that the whole process tree dies at the end —
// including processes that double-fork or call setsid. For that each run goes through a small reaper
// (this binary re-executed, see internal/host/reexec) that is the child
// subreaper of everything the program starts: orphans are reparented to it,
// and it kills and reaps every descendant when the program exits or when
// execbox asks it to stop (SIGTERM, or execbox's death through PDEATHSIG).
//
// Memory is bounded with RLIMIT_DATA rather than RLIMIT_AS: V8 (node)
// reserves gigabytes of address space it never touches and cannot start
// under an address-space limit, while RLIMIT_DATA counts what a program can
// really write to.
//
// With run_as_user (seed 004's host runner) the reaper and the program run
// as that unprivileged host user; execbox must be root, the user must exist
// and not be root, and the work root must exist and not be world-writable.
//
// The pids limit is RLIMIT_NPROC, which counts every task of the
// program's real user: it is set only for a run_as_user. Without one the
// program runs as execbox's own user, whose count holds execbox's threads
// and whatever else that user runs, so the limit would keep the program
// from starting processes and threads rather than bound the sandbox (as
// root it binds nothing); Enforcement and Capabilities say "not enforced"
// and why. Local's limits are what allow_unisolated accepts: the engine
// never runs it without that, and exempts it from allow_weak_limits.
//
// Files: local.go (registration, capabilities, health), create.go (the
// work dir, run_as_user, Close), exec.go (running through the reaper) and
// reaper.go (the reaper and exec-stage entry points). The id, operation
// lifecycle, WriteFiles and Artifacts are backend/internal/hostbase's
// WorkSandbox.
//
// The backend and its sandboxes are safe for concurrent use as the sandbox
// package's contract describes.
package local
