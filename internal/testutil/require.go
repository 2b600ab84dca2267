package testutil

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Required reports whether EXECBOX_REQUIRE (a comma-separated list) names
// feature: a missing prerequisite then fails the test instead of skipping it.
func Required(feature string) bool {
	return slices.Contains(strings.Split(os.Getenv("EXECBOX_REQUIRE"), ","), feature)
}

// SkipOrFail skips the test, or fails it when feature is required.
func SkipOrFail(t testing.TB, feature, format string, args ...any) {
	t.Helper()
	if Required(feature) {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// RequiresRoot skips (fails when feature is required) unless the test runs
// as root; feature's tests are named in the message.
func RequiresRoot(t testing.TB, feature string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, feature, "%s tests need root (euid %d)", feature, os.Geteuid())
	}
}

// RequiresBinary returns the path of the executable name, or skips (fails
// when feature is required) when it is not installed.
func RequiresBinary(t testing.TB, feature, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(t, feature, "%s is not installed: %v", name, err)
	}
	return p
}
