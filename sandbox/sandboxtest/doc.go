// Package sandboxtest is the conformance suite every sandbox.Backend runs:
//
//	func TestConformance(t *testing.T) {
//		b := ... // probe first; skip (or fail under EXECBOX_REQUIRE) when unavailable
//		sandboxtest.Run(t, b, sandboxtest.WithWorkRoot(root), sandboxtest.WithSpec(func(s *sandbox.Spec) { s.Image = "..." }))
//	}
//
// It uses only the public contract of package sandbox (Backend.Create,
// Sandbox.WriteFiles/Exec/Artifacts/Close, sandbox.Run and the types around
// them) and runs only /bin/sh (POSIX sh), coreutils and python3 inside the
// sandbox, so every backend can pass it unchanged; node too, for a
// JavaScript context, unless the backend declares its sandboxes have none
// (WithoutNode: then a JavaScript context must be refused as
// language_unavailable).
//
// What it checks, each as a stable subtest name (see Run): exit codes and
// signals, and 127/126 for a program that cannot start; stdin, stdout and
// stderr kept apart, streaming, a burst of 100 000 lines, the output cap on
// both sides; the environment allowlist, written out; a wall-clock timeout,
// a process timeout, a cancel and a Close that kill a double-forked,
// setsid'd, signal-ignoring process tree (its heartbeats, watched from the
// host, stop); files in and artifacts out with their limits, every
// path-rejection rule including writes through symlinks, symlink artifacts
// never followed; the Result fields; Close; one Exec at a time, and
// WriteFiles and Artifacts racing a program that swaps a directory for a
// symlink to the host; the pids limit against a fork bomb and a thread bomb
// (counted by the program and, where its tasks are host tasks, by the host)
// and the CPU quota measured against the run's wall time; a table of
// syscalls a normal program needs (the same result everywhere) and of those
// the policy denies (SyscallTable); ls, stat and Python's view of the work
// dir; select, poll and epoll on a pipe; and no temp dir, child process, fd
// or goroutine left after many runs.
//
// Invariants: every subtest can fail, for its own reason — the self-test
// (suite_linux_test.go) runs each against a backend broken in exactly that
// one way and checks the failure message; none needs a mock; no check
// measures a wall-clock window: a program that must wait for the host
// reads a gate on its stdin, the host waits for lines the program prints,
// and durations are only bounds a hang must pass (see sync.go); the suite
// cleans up after itself (every sandbox it creates is closed through
// t.Cleanup). A limit the backend says it does not enforce
// (Capabilities.Limits "not enforced …") is skipped with that reason.
//
// Concurrency: Run must be called from a test that has not called
// t.Parallel, because some subtests use t.Setenv (the environment and leak
// checks). Subtests run one after another.
package sandboxtest
