package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

type entryInfo struct {
	h    *tar.Header
	data []byte
}

func readTar(t *testing.T, b []byte) map[string]entryInfo {
	t.Helper()
	out := map[string]entryInfo{}
	tr := tar.NewReader(bytes.NewReader(b))
	var prev []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if _, dup := out[name]; dup {
			t.Errorf("%s twice in the tar", name)
		}
		parts := strings.Split(name, "/")
		if slices.Compare(parts, prev) <= 0 {
			t.Errorf("%s after %s: not in path order", name, strings.Join(prev, "/"))
		}
		prev = parts
		data, _ := io.ReadAll(tr)
		out[name] = entryInfo{h, data}
	}
}

// resolveIn follows p's symlinks within the tar's tree.
func resolveIn(ents map[string]entryInfo, p string) (string, bool) {
	parts := strings.Split(p, "/")
	cur := ""
	for hops := 0; len(parts) > 0; {
		c := parts[0]
		parts = parts[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			if cur == "." {
				cur = ""
			}
			continue
		}
		next := path.Join(cur, c)
		e, ok := ents[next]
		if !ok {
			return next, false
		}
		if e.h.Typeflag == tar.TypeSymlink {
			if hops++; hops > 40 {
				return next, false
			}
			if strings.HasPrefix(e.h.Linkname, "/") {
				cur = ""
			}
			parts = append(strings.Split(e.h.Linkname, "/"), parts...)
			continue
		}
		cur = next
	}
	return cur, true
}

// TestPythonFromHost builds the python image from this host's files and
// checks what is in it.
func TestPythonFromHost(t *testing.T) {
	// The offline image docker's CI builds is this one: where docker is
	// required, a host that cannot build it fails instead of skipping.
	r, err := Lookup("python", "/")
	if err != nil {
		testutil.SkipOrFail(t, "docker", "no host python: %v", err)
	}
	if _, err := os.Stat("/var/lib/dpkg/info"); err != nil {
		testutil.SkipOrFail(t, "docker", "not a dpkg host: %v", err)
	}
	var buf bytes.Buffer
	start := time.Now()
	st, err := Build(&buf, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %v: %d files (%.1f MiB), %d dirs, %d symlinks, missing %v",
		time.Since(start).Round(time.Millisecond), st.Files, float64(st.Bytes)/(1<<20), st.Dirs, st.Symlinks, st.Missing)
	if len(st.Missing) > 0 {
		t.Errorf("libraries missing: %v", st.Missing)
	}
	ents := readTar(t, buf.Bytes())
	for _, p := range []string{"bin/sh", "usr/bin/env", "usr/bin/sleep", "usr/bin/python3", "usr/bin/setsid",
		"usr/bin/grep", "bin/bash", "etc/passwd"} {
		end, ok := resolveIn(ents, p)
		if !ok || ents[end].h.Typeflag != tar.TypeReg {
			t.Errorf("%s does not lead to a regular file (ends at %s)", p, end)
		}
	}
	// The interpreter python needs is there too.
	py, _ := resolveIn(ents, "usr/bin/python3")
	f, err := elf.NewFile(bytes.NewReader(ents[py].data))
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(prog.Open())
			interp := strings.TrimRight(string(b), "\x00")
			if end, ok := resolveIn(ents, strings.TrimPrefix(interp, "/")); !ok || ents[end].h.Typeflag != tar.TypeReg {
				t.Errorf("python's interpreter %s is missing (ends at %s)", interp, end)
			}
		}
	}
	for name, e := range ents {
		h := e.h
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		default:
			t.Errorf("%s: type %c in the image", name, h.Typeflag)
		}
		if h.Mode&0o6000 != 0 {
			t.Errorf("%s: setuid/setgid bits %o", name, h.Mode)
		}
		if (h.Uid != 0 || h.Gid != 0) && name != "work" {
			t.Errorf("%s owned by %d:%d", name, h.Uid, h.Gid)
		}
		if strings.HasPrefix(name, "usr/share/doc/") || strings.HasPrefix(name, "usr/share/man/") {
			t.Errorf("documentation in the image: %s", name)
		}
		if h.Typeflag == tar.TypeSymlink {
			if _, ok := resolveIn(ents, name); !ok && !slices.Contains([]string{"lib32", "libx32"}, name) {
				t.Errorf("dangling symlink %s -> %s", name, h.Linkname)
			}
		}
	}
	if w := ents["work"]; w.h == nil || w.h.Uid != SandboxUID || w.h.Typeflag != tar.TypeDir {
		t.Errorf("/work: %+v", w.h)
	}
	if tmp := ents["tmp"]; tmp.h == nil || tmp.h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", tmp.h)
	}
	if !strings.Contains(string(ents["etc/passwd"].data), "nobody:x:65534:65534:") {
		t.Errorf("/etc/passwd: %q", ents["etc/passwd"].data)
	}
}

// TestBuildFromRoot builds from a made-up tree: merged /usr paths are
// canonical, symlinks stay inside the root, docs, devices and setuid bits
// are dropped, and a missing package is a clear error.
func TestBuildFromRoot(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string, mode fs.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/bin/tool", "#!/bin/sh\necho tool\n", 0o755)
	write("usr/bin/su", "setuid", 0o4755)
	write("usr/share/doc/tool/README", "docs", 0o644)
	write("usr/share/tool/data", "data", 0o644)
	write("etc/secret", "root's", 0o600)
	link("bin", "usr/bin")
	link("usr/share/tool/passwd", "/etc/secret") // absolute: inside the root
	write("var/lib/dpkg/info/tool.list", strings.Join([]string{"/.", "/bin", "/bin/tool", "/bin/su",
		"/usr/share/doc/tool/README", "/usr/share/tool/data", "/usr/share/tool/passwd", "/usr/bin/gone"}, "\n")+"\n", 0o644)

	var buf bytes.Buffer
	_, err := Build(&buf, Recipe{Name: "t", Packages: []string{"tool"}}, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic: the same tree gives the same bytes.
	var again bytes.Buffer
	if _, err := Build(&again, Recipe{Name: "t", Packages: []string{"tool"}}, Options{Root: root}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Errorf("two builds of the same tree differ")
	}
	ents := readTar(t, buf.Bytes())
	if e, ok := ents["usr/bin/tool"]; !ok || string(e.data) != "#!/bin/sh\necho tool\n" || e.h.Mode != 0o755 {
		t.Errorf("usr/bin/tool (listed as /bin/tool): %+v", e.h)
	}
	if _, ok := ents["bin/tool"]; ok {
		t.Errorf("bin/tool stored under the non-canonical path")
	}
	if e := ents["bin"]; e.h == nil || e.h.Typeflag != tar.TypeSymlink || e.h.Linkname != "usr/bin" {
		t.Errorf("bin is not the usr/bin symlink: %+v", e.h)
	}
	if e := ents["usr/bin/su"]; e.h == nil || e.h.Mode != 0o755 {
		t.Errorf("usr/bin/su keeps its setuid bit: %+v", e.h)
	}
	if _, ok := ents["usr/share/doc/tool/README"]; ok {
		t.Errorf("docs were taken")
	}
	if e := ents["etc/secret"]; string(e.data) != "root's" {
		t.Errorf("a symlink's target inside the root was not taken: %+v", e.h)
	}
	if _, err := Build(io.Discard, Recipe{Name: "t", Packages: []string{"absent"}}, Options{Root: root}); err == nil ||
		!strings.Contains(err.Error(), "apt-get install absent") {
		t.Errorf("a missing package: %v", err)
	}
	if _, err := Build(io.Discard, Recipe{Name: "t", Files: []string{"/usr/bin/gone"}}, Options{Root: root}); err == nil {
		t.Errorf("a missing required file was not an error")
	}
}
