package sandboxtest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// testSession: what a session relies on — several Execs in one sandbox
// share its files, and the file operations (sandbox.Files) work on the
// live work dir without ever following a symlink the program planted.
func (s *suite) testSession(t *testing.T) {
	if !s.caps.Sessions {
		t.Fatalf("backend %s does not offer sessions; every backend is meant to", s.b.Name())
	}
	s.run(t, "state_persists", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		for i := 1; i <= 3; i++ {
			res := s.exec(t, sb, &sandbox.Process{Args: []string{"sh", "-c", "echo line >> log; mkdir -p d; echo $(wc -l < log) > d/n; cat d/n"}})
			if res.Reason != sandbox.ReasonExited || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != fmt.Sprint(i) {
				t.Fatalf("exec %d: %s exit %d stdout %q stderr %q", i, res.Reason, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	})
	s.run(t, "files", func(t *testing.T) {
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.WorkSize = 96 * sandbox.MiB }))
		f, ok := sb.(sandbox.Files)
		if !ok {
			t.Fatalf("%T does not implement sandbox.Files", sb)
		}
		ctx := s.ctx(t)
		s.run(t, "round_trip_50MiB", func(t *testing.T) {
			const size = 50 * sandbox.MiB
			src := io.LimitReader(pattern{}, size)
			h := sha256.New()
			n, err := f.PutFile(ctx, "big/blob.bin", io.TeeReader(src, h), size)
			if err != nil || n != size {
				t.Fatalf("PutFile: %d, %v", n, err)
			}
			want := h.Sum(nil)
			h.Reset()
			n, err = f.GetFile(ctx, "big/blob.bin", h, size)
			if err != nil || n != size || !bytes.Equal(h.Sum(nil), want) {
				t.Fatalf("GetFile: %d bytes, %v; same content: %v", n, err, bytes.Equal(h.Sum(nil), want))
			}
			res := s.exec(t, sb, &sandbox.Process{Args: []string{"sh", "-c", "wc -c < big/blob.bin; rm big/blob.bin"}})
			if strings.TrimSpace(res.Stdout) != fmt.Sprint(size) {
				t.Fatalf("the program sees %q bytes (stderr %q)", res.Stdout, res.Stderr)
			}
		})
		s.run(t, "visible_both_ways", func(t *testing.T) {
			if _, err := f.PutFile(ctx, "in.txt", strings.NewReader("from the host"), 100); err != nil {
				t.Fatal(err)
			}
			res := s.exec(t, sb, &sandbox.Process{Args: []string{"sh", "-c", "cat in.txt; printf made > out.txt"}})
			if res.Stdout != "from the host" {
				t.Fatalf("the program read %q (stderr %q)", res.Stdout, res.Stderr)
			}
			var buf bytes.Buffer
			if _, err := f.GetFile(ctx, "out.txt", &buf, 100); err != nil || buf.String() != "made" {
				t.Fatalf("GetFile(out.txt) = %q, %v", buf.String(), err)
			}
		})
		s.run(t, "bounds", func(t *testing.T) {
			if _, err := f.PutFile(ctx, "max.txt", strings.NewReader("12345"), 5); err != nil {
				t.Fatalf("PutFile of exactly max: %v", err)
			}
			_, err := f.PutFile(ctx, "over.txt", strings.NewReader("123456"), 5)
			wantErr(t, "PutFile of max+1", err, sandbox.ErrLimit, "file_too_large")
			if _, err := f.Stat(ctx, "over.txt"); !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("a refused upload left a file: Stat = %v", err)
			}
			var buf bytes.Buffer
			if _, err := f.GetFile(ctx, "max.txt", &buf, 5); err != nil || buf.String() != "12345" {
				t.Fatalf("GetFile of exactly max: %q, %v", buf.String(), err)
			}
			_, err = f.GetFile(ctx, "max.txt", io.Discard, 4)
			wantErr(t, "GetFile over max", err, sandbox.ErrLimit, "file_too_large")
			_, err = f.GetFile(ctx, "missing", io.Discard, 5)
			wantErr(t, "GetFile of a missing file", err, sandbox.ErrNotFound, "file_not_found")
			_, err = f.PutFile(ctx, "../escape", strings.NewReader("x"), 5)
			wantErr(t, "PutFile ../escape", err, sandbox.ErrInvalid, "path_invalid")
		})
		s.run(t, "dirs", func(t *testing.T) {
			if err := f.Mkdir(ctx, "a/b/c"); err != nil {
				t.Fatal(err)
			}
			if err := f.Mkdir(ctx, "a/b/c"); err != nil {
				t.Fatalf("Mkdir of an existing directory: %v", err)
			}
			if _, err := f.PutFile(ctx, "a/b/c/x", strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
			list, truncated, err := f.List(ctx, "a/b", 10)
			if err != nil || truncated || len(list) != 1 || list[0].Path != "a/b/c" || list[0].Type != sandbox.FileDir {
				t.Fatalf("List(a/b) = %+v, %v, %v", list, truncated, err)
			}
			st, err := f.Stat(ctx, "a/b/c/x")
			if err != nil || st.Type != sandbox.FileRegular || st.Size != 1 {
				t.Fatalf("Stat = %+v, %v", st, err)
			}
			if st, err := f.Stat(ctx, ""); err != nil || st.Type != sandbox.FileDir {
				t.Fatalf(`Stat("") = %+v, %v`, st, err)
			}
			if err := f.Remove(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			_, err = f.Stat(ctx, "a")
			wantErr(t, "Stat after Remove", err, sandbox.ErrNotFound, "file_not_found")
			wantErr(t, `Remove("")`, f.Remove(ctx, ""), sandbox.ErrInvalid, "path_invalid")
		})
		s.run(t, "symlinks_not_followed", func(t *testing.T) {
			res := s.exec(t, sb, &sandbox.Process{Args: []string{"sh", "-c", "ln -s /etc ln_dir && ln -s /etc/passwd ln_file && mkfifo fifo"}})
			if res.ExitCode != 0 {
				t.Fatalf("planting: exit %d, %s", res.ExitCode, res.Stderr)
			}
			_, err := f.PutFile(ctx, "ln_dir/planted", strings.NewReader("x"), 1)
			wantErr(t, "PutFile through a symlinked dir", err, sandbox.ErrInvalid, "path_invalid")
			_, err = f.PutFile(ctx, "ln_file", strings.NewReader("x"), 1)
			wantErr(t, "PutFile onto a symlink", err, sandbox.ErrInvalid, "path_invalid")
			_, err = f.GetFile(ctx, "ln_dir/passwd", io.Discard, 1<<20)
			wantErr(t, "GetFile through a symlinked dir", err, sandbox.ErrInvalid, "path_invalid")
			_, err = f.GetFile(ctx, "ln_file", io.Discard, 1<<20)
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("GetFile of a symlink: %v, want ErrInvalid", err)
			}
			// It must not block. gVisor keeps a FIFO in its own kernel,
			// where the host does not see it at all.
			_, err = f.GetFile(ctx, "fifo", io.Discard, 1<<20)
			if !errors.Is(err, sandbox.ErrNotFound) {
				wantErr(t, "GetFile of a FIFO", err, sandbox.ErrInvalid, "not_a_file")
			}
			_, _, err = f.List(ctx, "ln_dir", 10)
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("List through a symlink: %v, want ErrInvalid", err)
			}
			if st, err := f.Stat(ctx, "ln_file"); err != nil || st.Type != sandbox.FileSymlink {
				t.Fatalf("Stat(ln_file) = %+v, %v; want a symlink", st, err)
			}
			wantErr(t, "Mkdir through a symlink", f.Mkdir(ctx, "ln_dir/x"), sandbox.ErrInvalid, "path_invalid")
			if err := f.Remove(ctx, "ln_dir"); err != nil {
				t.Fatalf("Remove of a symlink: %v", err)
			}
			res = s.exec(t, sb, &sandbox.Process{Args: []string{"sh", "-c", "test -e ln_dir || test -L ln_dir && echo still; test -f /etc/passwd && echo target"}})
			if strings.TrimSpace(res.Stdout) != "target" {
				t.Fatalf("after removing the link: %q (want only the target left)", res.Stdout)
			}
		})
	})
}

// wantErr fails unless err is of kind with code.
func wantErr(t *testing.T, what string, err error, kind *sandbox.Kind, code string) {
	t.Helper()
	if !errors.Is(err, kind) || sandbox.CodeOf(err) != code {
		t.Fatalf("%s: %v (code %q), want %v %q", what, err, sandbox.CodeOf(err), kind, code)
	}
}

// pattern is an endless reader of non-repeating-looking bytes.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return len(p), nil
}
