// Package testutil holds the test helpers the backend packages share:
// run-time gating by probes (a missing prerequisite skips the test, or
// fails it when EXECBOX_REQUIRE names the backend or feature), building a
// backend and waiting for it to be available (MustNew, Available, With),
// running a process or Python in a sandbox of any backend, a Watch on a
// program's output (to wait for a sign of it instead of sleeping), the
// side-by-side benchmark loop (SideBySide) and its medians, and checks that
// are identical across backends: Seed004, Registered, and HostKernel — the
// limits, isolation and mount checks of the backends that run the program
// on the host kernel in namespaces of its own (native, bwrap), each the
// union of what those backends used to check apart.
//
// Invariants: a helper never hides a failure — errors fail the test (or,
// for Exec, mark it failed and return a sandbox-error result). Every
// sandbox a helper creates is closed when the test ends.
//
// Concurrency: the helpers keep no state; they are safe to call from
// parallel tests.
package testutil
