package gvisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestRunscAnswersKept: what runsc says about itself is asked once per
// binary and kept in the state dir; the next process (here: a new backend)
// runs sandboxes without asking again. A rebuilt runsc (another mtime) is
// asked again, and a cache file others could have written is not trusted.
func TestRunscAnswersKept(t *testing.T) {
	rootOnly(t)
	real := testutil.RequiresBinary(t, Name, "runsc")
	dir := t.TempDir()
	log := filepath.Join(dir, "asked")
	fake := filepath.Join(dir, "runsc")
	// Logs each question, then is the real runsc.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$*\" >>"+log+"\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	probe := func() (asked string) {
		t.Helper()
		os.Remove(log)
		b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), StateDir: state,
			Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = fake })})
		if h := b.Host(); h.Err != nil || h.Own.policy == nil {
			t.Fatalf("host probe: %v", h.Err)
		}
		data, _ := os.ReadFile(log)
		// Only the questions, not the runs.
		for l := range strings.Lines(string(data)) {
			if !strings.Contains(l, "--root") {
				asked += l
			}
		}
		return asked
	}
	if asked := probe(); !strings.Contains(asked, "--version") || !strings.Contains(asked, "help syscalls") {
		t.Fatalf("the first probe asked %q", asked)
	}
	cache := filepath.Join(state, runscCacheFile)
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", fi, err)
	}
	if asked := probe(); asked != "" {
		t.Errorf("the second probe asked runsc again: %q", asked)
	}
	// With the kept answers, a sandbox runs (the policy was built from the
	// kept table).
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), StateDir: state,
		Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = fake })})
	if res := testutil.Run(t, b, sandbox.Spec{}, "sh", "-c", "ls / >/dev/null && echo ok"); res.Stdout != "ok\n" {
		t.Errorf("a run with the kept answers: %+v", res)
	}

	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(fake, later, later); err != nil {
		t.Fatal(err)
	}
	if asked := probe(); !strings.Contains(asked, "help syscalls") {
		t.Errorf("a changed runsc was not asked again: %q", asked)
	}
	if err := os.Chmod(cache, 0o666); err != nil {
		t.Fatal(err)
	}
	if asked := probe(); !strings.Contains(asked, "help syscalls") {
		t.Errorf("a cache file others may write was trusted: %q", asked)
	}
}
