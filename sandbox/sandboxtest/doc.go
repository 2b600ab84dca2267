// Package sandboxtest is the conformance suite every sandbox.Backend runs:
//
//	func TestConformance(t *testing.T) {
//		b := ... // probe first; skip (or fail under EXECBOX_REQUIRE) when unavailable
//		sandboxtest.Run(t, b, sandboxtest.WithSpec(func(s *sandbox.Spec) { s.Image = "..." }))
//	}
//
// It uses only the public contract of package sandbox (Backend.Create,
// Sandbox.WriteFiles/Exec/Artifacts/Close, sandbox.Run and the types around
// them) and runs only /bin/sh (POSIX sh) and coreutils programs inside the
// sandbox, so every backend can pass it unchanged.
//
// What it checks, each as a stable subtest name (see Run): exit codes and
// signals, stdin, stdout and stderr kept apart, streaming, the output cap on
// both sides, the environment allowlist, a wall-clock timeout and a cancel
// that kill a double-forked, setsid'd, signal-ignoring process tree (checked
// from the host's /proc and, for backends with sessions, from inside),
// files in and artifacts out with their limits, every path-rejection rule
// including writes through symlinks, symlink artifacts never followed, the
// Result fields, Close, and no temp dir, child process, fd or goroutine left
// after many runs.
//
// Invariants: every subtest can fail; none needs a mock; the suite cleans up
// after itself (every sandbox it creates is closed through t.Cleanup).
//
// Concurrency: Run must be called from a test that has not called
// t.Parallel, because some subtests use t.Setenv (the environment and leak
// checks). Subtests run one after another.
package sandboxtest
