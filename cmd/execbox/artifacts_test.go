package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// TestWriteArtifactsStaysInside: a hostile artifact path is refused before
// anything is written, and a symlink planted inside the artifacts dir is
// never followed out of it.
func TestWriteArtifactsStaysInside(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../escape", "/etc/escape", "a/../../escape", "a//b", "", "./x", "a/\x00b"} {
		dir := t.TempDir()
		err := writeArtifacts(dir, []sandbox.Artifact{{Path: "ok.txt", Data: []byte("ok")}, {Path: bad, Data: []byte("x")}})
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "path_invalid" {
			t.Errorf("path %q: %v, want path_invalid", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "escape")); err == nil {
		t.Fatal("an artifact was written outside the artifacts dir")
	}

	// Links planted in the artifacts dir: to a file and to a directory
	// outside it.
	dir := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dir, "out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, a := range []sandbox.Artifact{{Path: "out.txt", Data: []byte("owned")}, {Path: "sub/victim", Data: []byte("owned")}, {Path: "sub/new", Data: []byte("owned")}} {
		if err := writeArtifacts(dir, []sandbox.Artifact{a}); err == nil {
			t.Errorf("artifact %s through a planted symlink: written", a.Path)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Fatalf("the file outside was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was created outside through a planted symlink")
	}

	// The artifacts dir itself may be a symlink the user chose: it is
	// followed, and nothing below it is.
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "arts")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := writeArtifacts(link, []sandbox.Artifact{{Path: "d/e.txt", Data: []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "d", "e.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("through the user's own link: %q %v", b, err)
	}
}
