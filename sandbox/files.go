package sandbox

import (
	"context"
	"io"
	"time"
)

// Files is a Sandbox whose work dir can be read and changed one file at a
// time while it lives: a session's files. Every path is relative to the
// work dir and checked with CheckPath ("" names the work dir itself where
// a directory is meant: Stat, List); no path is ever resolved through a
// symlink, not even one the sandboxed program plants while the call runs —
// such a path is ErrInvalid "path_invalid", as is one through a
// non-directory. A path that does not exist is ErrNotFound "file_not_found".
// A work dir that fills up is ErrLimit "work_size_exceeded". The methods
// may run while an Exec runs, and concurrently with each other.
type Files interface {
	// PutFile creates or replaces the regular file at path with what r
	// holds, creating missing parent directories. More than max bytes is
	// ErrLimit "file_too_large" and leaves no file at path. It returns the
	// bytes written.
	PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error)
	// GetFile copies the regular file at path to w: a directory, a
	// symlink or a special file is ErrInvalid "not_a_file". Copying stops
	// with ErrLimit "file_too_large" after max bytes (w then holds max).
	GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error)
	// Stat describes the entry at path without following a symlink.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List describes the entries of the directory dir, sorted by name,
	// at most max of them; truncated says that there were more.
	List(ctx context.Context, dir string, max int) (entries []FileInfo, truncated bool, err error)
	// Remove removes the entry at path, a directory with everything in
	// it; a symlink is removed, never followed. The work dir itself ("")
	// cannot be removed.
	Remove(ctx context.Context, path string) error
	// Mkdir creates the directory path and its missing parents; one that
	// exists is no error.
	Mkdir(ctx context.Context, path string) error
}

// FileInfo describes one entry of a work dir.
type FileInfo struct {
	// Path is relative to the work dir ("" for the work dir itself).
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // the permission bits
	ModTime time.Time `json:"mtime"`
}

// File types of FileInfo.Type.
const (
	FileRegular = "file"
	FileDir     = "dir"
	FileSymlink = "symlink"
	FileOther   = "other"
)
