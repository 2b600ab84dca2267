// Package testutil holds the test helpers the backend packages share:
// run-time gating by probes (a missing prerequisite skips the test, or
// fails it when EXECBOX_REQUIRE names the backend or feature), running a
// process or Python in a sandbox of any backend, median measurement for
// benchmarks, and checks that are identical across backends (Seed004).
//
// Invariants: a helper never hides a failure — errors fail the test (or,
// for Exec, mark it failed and return a sandbox-error result). Every
// sandbox a helper creates is closed when the test ends.
//
// Concurrency: the helpers keep no state; they are safe to call from
// parallel tests.
package testutil
