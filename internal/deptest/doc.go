// Package deptest holds the project's negative dependency tests (the idea
// of Tailscale's tstest/deptest): a rule says which packages a package may
// not depend on, directly or through others, and the test fails the moment
// a forbidden import appears anywhere below it. The rules are in
// deps_test.go; Deps and Check are the helpers.
//
// Check asks the go command (`go list -deps`) for the real dependency
// graph of the current build (GOOS, GOARCH, tags), so what it proves is
// what the linker would link.
//
// Concurrency: the functions have no shared state.
package deptest
