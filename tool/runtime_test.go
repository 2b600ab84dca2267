package tool

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func TestNewChecksOptions(t *testing.T) {
	rt := filepath.Join(t.TempDir(), "rt")
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		o    Options
		code string
	}{
		{Options{Dirs: []string{"relative/tools"}}, CodeDirInvalid},
		{Options{Dirs: []string{"/no/such/dir"}}, CodeDirInvalid},
		{Options{Dirs: []string{file}}, CodeDirInvalid},
		{Options{ArgsMax: maxArgsMax + 1}, CodeOptionsInvalid},
		{Options{MaxArgs: -1}, CodeOptionsInvalid},
		{Options{Timeout: time.Hour}, CodeOptionsInvalid},
		{Options{Dirs: make([]string, maxDirs+1)}, CodeOptionsInvalid},
		{Options{RuntimeDir: "rel"}, CodeOptionsInvalid},
	} {
		if c.o.RuntimeDir == "" {
			c.o.RuntimeDir = rt
		}
		_, err := New(c.o)
		wantErr(t, err, sandbox.ErrInvalid, c.code)
	}
	// A tools dir reached through a symlink is mounted from its target.
	real := toolsDir(t, nil)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(real, link)
	s, err := New(Options{Dirs: []string{link}, RuntimeDir: rt})
	if err != nil {
		t.Fatal(err)
	}
	if s.dirs[0] != real || s.opts.Dirs[0] != link {
		t.Fatalf("dirs %v, options %v", s.dirs, s.opts.Dirs)
	}
}

func TestMaterialise(t *testing.T) {
	root := filepath.Join(t.TempDir(), "rt")
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	errs := make([]error, 8)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = materialise(root) })
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Fatalf("concurrent materialise: %q %v, first %q", dirs[i], errs[i], dirs[0])
		}
	}
	dir := dirs[0]
	if filepath.Base(dir) != runtimeHash {
		t.Fatalf("dir %s is not named by the content hash", dir)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Fatalf("leftovers in the runtime dir: %v", entries)
	}
	for name, want := range map[string]os.FileMode{".": 0o755, "tools": 0o755, "entry.py": 0o644, "tools/python.py": 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v %v, want %v", name, st.Mode(), err, want)
		}
	}
	st, _ := os.Stat(root)
	if st.Mode().Perm() != 0o755 {
		t.Fatalf("runtime dir mode %v", st.Mode())
	}
	// Idempotent, and an altered copy is refused, not used.
	if again, err := materialise(root); err != nil || again != dir {
		t.Fatalf("again: %q %v", again, err)
	}
	os.WriteFile(filepath.Join(dir, "entry.py"), []byte("print('evil')"), 0o644)
	_, err := materialise(root)
	wantErr(t, err, sandbox.ErrInternal, CodeRuntimeFailed)
	os.WriteFile(filepath.Join(dir, "entry.py"), runtimeFiles["entry.py"], 0o644)
	os.WriteFile(filepath.Join(dir, "tools", "planted.py"), nil, 0o644)
	_, err = materialise(root)
	wantErr(t, err, sandbox.ErrInternal, CodeRuntimeFailed)
}

func TestMaterialiseRefusesUnsafeDirs(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	os.Mkdir(target, 0o755)
	link := filepath.Join(base, "link")
	os.Symlink(target, link)
	_, err := materialise(link)
	wantErr(t, err, sandbox.ErrInvalid, CodeRuntimeUnsafe)

	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	_, err = materialise(open)
	wantErr(t, err, sandbox.ErrInvalid, CodeRuntimeUnsafe)

	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	_, err = materialise(file)
	wantErr(t, err, sandbox.ErrInvalid, CodeRuntimeUnsafe)

	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o755)
		os.Chown(theirs, 65534, 65534)
		_, err = materialise(theirs)
		wantErr(t, err, sandbox.ErrInvalid, CodeRuntimeUnsafe)
		// A copy planted by another user inside our dir is refused too.
		mine := filepath.Join(base, "mine")
		os.Mkdir(mine, 0o755)
		planted := filepath.Join(mine, runtimeHash)
		os.Mkdir(planted, 0o755)
		os.Chown(planted, 65534, 65534)
		_, err = materialise(mine)
		wantErr(t, err, sandbox.ErrInvalid, CodeRuntimeUnsafe)
	}
}
