package sandboxtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// badPaths break one CheckPath rule each.
var badPaths = []struct{ name, path string }{
	{"absolute", "/etc/x"},
	{"dotdot", "../x"},
	{"dotdot_inner", "a/../../x"},
	{"nul", "a\x00b"},
	{"long_component", strings.Repeat("c", sandbox.MaxNameLen+1)},
	{"long_path", longPath(sandbox.MaxPathLen + 1)},
	{"empty", ""},
	{"dot_component", "./x"},
	{"empty_component", "a//b"},
	{"trailing_slash", "a/"},
}

// longPath is a valid-looking relative path of exactly n bytes made of
// 199-byte components.
func longPath(n int) string {
	c := strings.Repeat("p", 199)
	var b strings.Builder
	for b.Len()+200 < n {
		b.WriteString(c + "/")
	}
	b.WriteString(strings.Repeat("q", n-b.Len()))
	return b.String()
}

// wantInvalid fails unless err is ErrInvalid and its message names path.
func wantInvalid(t *testing.T, what string, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s with path %s: want ErrInvalid, got nil", what, clip(path))
	}
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("%s with path %s: want ErrInvalid, got %s (kind %s)", what, clip(path), clip(err.Error()), sandbox.KindOf(err).Code())
	}
	if msg := err.Error(); !strings.Contains(msg, strconv.Quote(path)) && (path == "" || !strings.Contains(msg, path)) {
		t.Errorf("%s: the error does not name the path %s: %s", what, clip(path), clip(msg))
	}
}

func (s *suite) testPaths(t *testing.T) {
	s.run(t, "write_files", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		for _, c := range badPaths {
			s.run(t, c.name, func(t *testing.T) {
				err := sb.WriteFiles(s.ctx(t), map[string][]byte{c.path: []byte("x")})
				wantInvalid(t, "WriteFiles", err, c.path)
			})
		}
	})

	// The other side of the length bounds: the longest allowed name and path
	// are written and readable.
	s.run(t, "accepted", func(t *testing.T) {
		s.run(t, "long_component_255", func(t *testing.T) {
			name := strings.Repeat("n", sandbox.MaxNameLen)
			sb := s.create(t, s.spec(nil))
			if err := sb.WriteFiles(s.ctx(t), map[string][]byte{"d/" + name: []byte("long name")}); err != nil {
				t.Fatalf("WriteFiles with a %d-byte component: %s", sandbox.MaxNameLen, clip(err.Error()))
			}
			res := s.exec(t, sb, sh("cat d/"+name))
			wantExit(t, res, 0)
			if res.Stdout != "long name" {
				t.Errorf("reading it back: %s", describe(res))
			}
		})
		s.run(t, "long_path_4096", func(t *testing.T) {
			p := longPath(sandbox.MaxPathLen)
			sb := s.create(t, s.spec(nil))
			if err := sb.WriteFiles(s.ctx(t), map[string][]byte{p: []byte("long path")}); err != nil {
				t.Fatalf("WriteFiles with a valid %d-byte path: %s", len(p), clip(err.Error()))
			}
			// The program cannot open a 4096-byte path in one go (PATH_MAX
			// counts the NUL), so it walks there.
			parts := strings.Split(p, "/")
			script := "set -e\n"
			for _, d := range parts[:len(parts)-1] {
				script += "cd " + d + "\n"
			}
			res := s.exec(t, sb, sh(script+"cat "+parts[len(parts)-1]))
			wantExit(t, res, 0)
			if res.Stdout != "long path" {
				t.Errorf("reading it back: %s", describe(res))
			}
		})
	})

	s.run(t, "atomic", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		err := sb.WriteFiles(s.ctx(t), map[string][]byte{
			"good.txt": []byte("g"), "gooddir/f.txt": []byte("f"), "a/../../x": []byte("bad"),
		})
		wantInvalid(t, "WriteFiles", err, "a/../../x")
		res := s.exec(t, sb, sh("for f in good.txt gooddir a; do if test -e $f; then echo $f; fi; done; true"))
		wantExit(t, res, 0)
		if res.Stdout != "" {
			t.Errorf("a rejected WriteFiles wrote something anyway: %s", clip(res.Stdout))
		}
	})

	s.run(t, "exec_invalid", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		for _, dir := range []string{"../", "/etc", "a/../.."} {
			p := sh("pwd")
			p.Dir = dir
			res, err := sb.Exec(s.ctx(t), p)
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("Exec with Dir %q: want ErrInvalid, got err=%v result=%s", dir, err, describe(res))
			}
		}
		for _, args := range [][]string{nil, {""}} {
			res, err := sb.Exec(s.ctx(t), &sandbox.Process{Args: args})
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("Exec with Args %q: want ErrInvalid, got err=%v result=%s", args, err, describe(res))
			}
		}
	})

	s.run(t, "symlink", s.testSymlinkWrites)
}

// testSymlinkWrites: the program plants symlinks to host places; a later
// WriteFiles through them must be refused and must not touch the host. The
// targets are a host temp dir made for the purpose and /etc (written with
// the exact bytes /etc/passwd already has, so a backend that follows the link
// cannot damage the host).
func (s *suite) testSymlinkWrites(t *testing.T) {
	victim := t.TempDir()
	victimFile := filepath.Join(victim, "file")
	victimData := []byte("victim-" + token())
	if err := os.WriteFile(victimFile, victimData, 0o644); err != nil {
		t.Fatal(err)
	}
	sb := s.create(t, s.spec(nil))
	res := s.exec(t, sb, sh(`set -e
ln -s `+shQuote(victim)+` dlink
ln -s `+shQuote(victimFile)+` flink
mkdir real
ln -s real rlink
ln -s /etc elink
echo planted`))
	wantExit(t, res, 0)

	write := func(t *testing.T, path string, data []byte) {
		t.Helper()
		err := sb.WriteFiles(s.ctx(t), map[string][]byte{path: data})
		wantInvalid(t, "WriteFiles through a symlink", err, path)
	}
	absent := func(t *testing.T, p string) {
		t.Helper()
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("WriteFiles followed a symlink out of the sandbox and created host path %s", p)
			_ = os.RemoveAll(p)
		}
	}

	s.run(t, "dir", func(t *testing.T) {
		write(t, "dlink/new.txt", []byte("x"))
		absent(t, filepath.Join(victim, "new.txt"))
	})
	s.run(t, "dir_deep", func(t *testing.T) {
		write(t, "dlink/sub/new.txt", []byte("x"))
		absent(t, filepath.Join(victim, "sub"))
	})
	s.run(t, "file", func(t *testing.T) {
		write(t, "flink", []byte("overwritten"))
		if b, err := os.ReadFile(victimFile); err != nil || !bytes.Equal(b, victimData) {
			t.Errorf("WriteFiles followed a symlink and changed host file %s: %q, %v", victimFile, b, err)
		}
	})
	s.run(t, "relative", func(t *testing.T) {
		// A symlink is refused even when it points inside the work dir.
		write(t, "rlink/x", []byte("x"))
	})
	s.run(t, "etc", func(t *testing.T) {
		before, err := os.ReadFile("/etc/passwd")
		if err != nil {
			t.Fatalf("reading the host's /etc/passwd: %v", err)
		}
		st, err := os.Stat("/etc/passwd")
		if err != nil {
			t.Fatal(err)
		}
		write(t, "elink/passwd", before)
		after, err := os.ReadFile("/etc/passwd")
		st2, err2 := os.Stat("/etc/passwd")
		if err != nil || err2 != nil || !bytes.Equal(before, after) || !os.SameFile(st, st2) ||
			st.Mode() != st2.Mode() || !st.ModTime().Equal(st2.ModTime()) {
			t.Errorf("the host's /etc/passwd changed after WriteFiles(\"elink/passwd\")")
		}
		name := "execbox-suite-" + token()
		write(t, "elink/"+name, []byte("x"))
		absent(t, filepath.Join("/etc", name))
	})
	s.run(t, "atomic", func(t *testing.T) {
		// A call refused for a symlink writes nothing, not even the valid
		// paths that sort before the bad one.
		if !s.caps.Sessions {
			t.Skip("needs a second Exec in the sandbox (Capabilities.Sessions is false)")
		}
		err := sb.WriteFiles(s.ctx(t), map[string][]byte{"aaa.txt": []byte("x"), "dlink/x": []byte("x"), "zzz/y": []byte("y")})
		wantInvalid(t, "WriteFiles through a symlink", err, "dlink/x")
		absent(t, filepath.Join(victim, "x"))
		res := s.exec(t, sb, sh("for f in aaa.txt zzz; do if test -e $f; then echo $f; fi; done; true"))
		wantExit(t, res, 0)
		if res.Stdout != "" {
			t.Errorf("a WriteFiles refused for a symlink wrote other files anyway: %s", clip(res.Stdout))
		}
	})
}
