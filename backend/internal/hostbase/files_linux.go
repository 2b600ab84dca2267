package hostbase

import (
	"context"
	"io"

	"github.com/execbox/execbox/sandbox"
)

// The sandbox.Files methods: the work dir's files one at a time (see
// workdir.Dir.Put and the rest). They may run while an Exec runs and
// alongside each other, so they do not take s.files: that orders only
// WriteFiles and Artifacts around the artifacts baseline, which these
// leave alone. Close waits for them like for any operation; a transfer
// (PutFile, GetFile) is ended when Close begins.

// PutFile creates or replaces the regular file path in the work dir.
func (s *WorkSandbox) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.Work.Put(path, ctxReader{ctx, r}, max)
}

// GetFile copies the regular file path in the work dir to w.
func (s *WorkSandbox) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.Work.Get(path, ctxWriter{ctx, w}, max)
}

// Stat describes the entry path in the work dir.
func (s *WorkSandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.FileInfo{}, err
	}
	defer s.life.Done()
	return s.Work.Stat(path)
}

// List describes the entries of the directory dir in the work dir.
func (s *WorkSandbox) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return nil, false, err
	}
	defer s.life.Done()
	return s.Work.List(dir, max)
}

// Remove removes the entry path in the work dir, a directory with
// everything in it.
func (s *WorkSandbox) Remove(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.Work.RemovePath(path)
}

// Mkdir creates the directory path in the work dir and its parents.
func (s *WorkSandbox) Mkdir(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.Work.Mkdir(path)
}

// ctxReader and ctxWriter end a copy between two reads or writes once the
// caller's context is done: a cancelled PutFile or GetFile of a large
// file stops at its next read or write instead of copying on.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, interrupted(c.ctx)
	}
	return c.r.Read(p)
}

type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, interrupted(c.ctx)
	}
	return c.w.Write(p)
}

// interrupted is the error of a copy ctx ended: sandbox_closed when Close
// began (BeginOp's cause), else "interrupted".
func interrupted(ctx context.Context) error {
	if cause := context.Cause(ctx); sandbox.CodeOf(cause) != "" {
		return cause
	}
	return sandbox.Errorf(sandbox.ErrUnavailable, "interrupted", "copying a file: %w", ctx.Err())
}

// Interface guards.
var _ sandbox.Files = (*WorkSandbox)(nil)
