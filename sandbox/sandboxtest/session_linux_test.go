package sandboxtest_test

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/execbox/execbox/sandbox"
)

// The session variants' defects in the file operations; without one of
// them, each passes the call to the real sandbox.

func (s *brokenSandbox) files() sandbox.Files { return s.Sandbox.(sandbox.Files) }

func (s *brokenSandbox) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	switch s.b.knob {
	case "files_unbounded":
		max = 1 << 40
	case "put_file_empty":
		io.Copy(io.Discard, r)
		r = eof{}
	}
	return s.files().PutFile(ctx, path, r, max)
}

func (s *brokenSandbox) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	switch s.b.knob {
	case "files_unbounded":
		max = 1 << 40
	case "get_file_short":
		w = &dropLast{w: w}
	case "get_file_follows_symlinks":
		// Reading only: a write through the program's symlink would
		// land on this host.
		f, err := os.Open(filepath.Join(s.workDir(), path))
		if err == nil {
			defer f.Close()
			return io.Copy(w, io.LimitReader(f, max))
		}
	}
	n, err := s.files().GetFile(ctx, path, w, max)
	if _, ok := w.(*dropLast); ok && n > 0 {
		n--
	}
	return n, err
}

func (s *brokenSandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	return s.files().Stat(ctx, path)
}

func (s *brokenSandbox) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	return s.files().List(ctx, dir, max)
}

func (s *brokenSandbox) Remove(ctx context.Context, path string) error {
	if s.b.knob == "remove_ignored" && path != "" {
		return nil
	}
	return s.files().Remove(ctx, path)
}

func (s *brokenSandbox) Mkdir(ctx context.Context, path string) error {
	return s.files().Mkdir(ctx, path)
}

type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// dropLast passes everything on but the stream's last byte.
type dropLast struct {
	w    io.Writer
	held []byte
}

func (d *dropLast) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(d.held) > 0 {
		if _, err := d.w.Write(d.held); err != nil {
			return 0, err
		}
	}
	if _, err := d.w.Write(p[:len(p)-1]); err != nil {
		return 0, err
	}
	d.held = append(d.held[:0], p[len(p)-1])
	return len(p), nil
}

var _ sandbox.Files = (*brokenSandbox)(nil)
