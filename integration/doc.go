// Package integration holds black-box tests that build the real execbox
// binary and run it as a user would. It has no non-test code.
package integration
