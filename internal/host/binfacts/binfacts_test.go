package binfacts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOutputAskedOncePerBinary: a binary is asked once and its answer
// kept; the next process (here: the next call) reads it; a changed binary
// (another mtime) is asked again; a kept file others could have written,
// or one that is not a regular file, is not trusted; no state dir keeps
// nothing.
func TestOutputAskedOncePerBinary(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "asked")
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$*\" >>"+log+"\necho 'tool 1.2.3'\necho second line\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tool-version.json")
	asks := func() int {
		data, _ := os.ReadFile(log)
		return strings.Count(string(data), "--version")
	}
	call := func(file string) {
		t.Helper()
		out, err := Output(file, bin, "--version")
		if err != nil || out != "tool 1.2.3\nsecond line" {
			t.Fatalf("Output: %q %v", out, err)
		}
	}
	call(file)
	call(file)
	if n := asks(); n != 1 {
		t.Fatalf("asked %d times for two calls, want 1", n)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept file: %v %v", fi, err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	call(file)
	if n := asks(); n != 2 {
		t.Fatalf("a changed binary: asked %d times in all, want 2", n)
	}
	if err := os.Chmod(file, 0o620); err != nil {
		t.Fatal(err)
	}
	call(file)
	if n := asks(); n != 3 {
		t.Fatalf("a kept file the group may write was trusted: asked %d times in all, want 3", n)
	}
	// A symlink to a good file is not the file.
	good := filepath.Join(t.TempDir(), "good.json")
	call(good)
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	before := asks()
	if _, err := Output(link, bin, "--version"); err != nil {
		t.Fatal(err)
	}
	if asks() != before+1 {
		t.Fatal("a kept file reached through a symlink was trusted")
	}
	before = asks()
	call("")
	call("")
	if asks() != before+2 {
		t.Fatal(`with file "" an answer was kept`)
	}
	if _, err := Output(file, filepath.Join(dir, "missing"), "--version"); err == nil {
		t.Fatal("a missing binary answered")
	}
}
