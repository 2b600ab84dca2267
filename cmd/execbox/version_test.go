package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionPrintsTheStamps(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "1.2.0", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	var out bytes.Buffer
	readBuildInfo().write(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"execbox 1.2.0", "commit: " + commit, "built: " + date}
	for i, w := range want {
		if i >= len(lines) || lines[i] != w {
			t.Fatalf("line %d: got %q, want %q; all:\n%s", i+1, lines[i], w, out.String())
		}
	}
}

func TestVersionOfADevelopmentBuild(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "dev", "", ""
	var out bytes.Buffer
	readBuildInfo().write(&out)
	// Whether the toolchain stamped VCS information depends on how the
	// test was built; the shape does not.
	if !strings.HasPrefix(out.String(), "execbox dev\ncommit: ") || !strings.Contains(out.String(), "\nbuilt: ") {
		t.Fatalf("got:\n%s", out.String())
	}
}
