package rootimage

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/internal/host/layer"
)

// Host unpacks an image made offline from this host's files (the
// docker backend's python image: a shell, coreutils, Python and their
// libraries) into a directory of t's, as execbox's image store unpacks a
// pulled one, for the conformance suite's root_image case
// (sandboxtest.WithRootImage). The directory and what it holds are
// readable by every user, as a store's roots are.
func Host(t testing.TB) string {
	t.Helper()
	r, err := image.Lookup("python", "/")
	if err != nil {
		t.Fatalf("the python image's recipe: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The temp dir above it must be passable for the sandbox's user.
	os.Chmod(filepath.Dir(dir), 0o755)
	pr, pw := io.Pipe()
	go func() {
		_, err := image.Build(pw, r, image.Options{Root: "/"})
		pw.CloseWithError(err)
	}()
	root, err := layer.Open(dir, layer.Limits{MaxBytes: 4 << 30, MaxEntries: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Apply(pr); err != nil {
		t.Fatalf("unpacking the host's python image: %v", err)
	}
	return dir
}
