package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/sandbox"
)

// The filesystem.Filesystem service and the daemon's /files: the work
// dir's file operations (sandbox.Files), paths as e2bPath maps them.

// Bounds of the file operations.
const (
	// e2bMaxEntries bounds a listing, every depth together, and what a
	// watch compares.
	e2bMaxEntries = 10000
	// e2bMaxDepth bounds a listing's depth.
	e2bMaxDepth = 32
	// e2bWatchEvery is how often a watch looks for changes.
	e2bWatchEvery = 200 * time.Millisecond
	// e2bMaxWatches bounds the watches one sandbox has open, and
	// e2bMaxWatchesAll those of every sandbox together: each lists its
	// directory every e2bWatchEvery.
	e2bMaxWatchesAll = 64
	e2bMaxWatches    = 8
)

// e2bFiles is the call's session's file operations, within the token's
// limits until release.
func (s *Server) e2bFiles(ctx context.Context) (sandbox.Files, func(), error) {
	c := e2bCallOf(ctx)
	release, err := admitted(c.r)
	if err != nil {
		return nil, release, err
	}
	f, err := c.sess.Files()
	return f, release, err
}

// e2bAt is e2bFiles and path as a path in the work dir, for the Connect
// procedures: errors are Connect errors.
func (s *Server) e2bAt(ctx context.Context, path string) (sandbox.Files, string, func(), error) {
	p, err := e2bPath(path)
	if err != nil {
		return nil, "", func() {}, e2bErr(err)
	}
	f, release, err := s.e2bFiles(ctx)
	return f, p, release, e2bErr(err)
}

// e2bEntry describes an entry as the SDKs read it.
func e2bEntry(fi sandbox.FileInfo) e2b.EntryInfo {
	e := e2b.EntryInfo{Name: path.Base("/" + fi.Path), Path: path.Join(e2bWorkDir, fi.Path), Size: fi.Size, Mode: fi.Mode,
		Owner: "user", Group: "user", ModifiedTime: fi.ModTime}
	mode := fs.FileMode(fi.Mode)
	switch fi.Type {
	case sandbox.FileDir:
		e.Type, mode = e2b.FileTypeDirectory, mode|fs.ModeDir
	case sandbox.FileSymlink:
		e.Type, mode = e2b.FileTypeSymlink, mode|fs.ModeSymlink
	default:
		e.Type = e2b.FileTypeFile
	}
	if fi.Path == "" {
		e.Name = path.Base(e2bWorkDir)
	}
	e.Permissions = mode.String()
	return e
}

// e2bStat is filesystem.Filesystem/Stat.
func (s *Server) e2bStat(ctx context.Context, req *e2b.PathRequest) (*e2b.EntryResponse, error) {
	f, p, release, err := s.e2bAt(ctx, req.Path)
	defer release()
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat(ctx, p)
	if err != nil {
		return nil, e2bErr(err)
	}
	return &e2b.EntryResponse{Entry: e2bEntry(fi)}, nil
}

// e2bListDir is filesystem.Filesystem/ListDir: depth levels down.
func (s *Server) e2bListDir(ctx context.Context, req *e2b.ListDirRequest) (*e2b.ListDirResponse, error) {
	depth := max(req.Depth, 1)
	if depth > e2bMaxDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("depth %d: give at most %d", depth, e2bMaxDepth))
	}
	f, p, release, err := s.e2bAt(ctx, req.Path)
	defer release()
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(ctx, p); err != nil {
		return nil, e2bErr(err)
	} else if fi.Type != sandbox.FileDir {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", req.Path))
	}
	entries, err := e2bWalk(ctx, f, p, int(depth))
	if err != nil {
		return nil, e2bErr(err)
	}
	out := &e2b.ListDirResponse{Entries: make([]e2b.EntryInfo, 0, len(entries))}
	for _, fi := range entries {
		out.Entries = append(out.Entries, e2bEntry(fi))
	}
	return out, nil
}

// e2bWalk lists dir depth levels down, directories before what is in
// them, at most e2bMaxEntries entries (more is an error, never a silent
// cut).
func e2bWalk(ctx context.Context, f sandbox.Files, dir string, depth int) ([]sandbox.FileInfo, error) {
	var out []sandbox.FileInfo
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		entries, truncated, err := f.List(ctx, dir, e2bMaxEntries-len(out))
		if err != nil {
			return err
		}
		if truncated {
			return sandbox.Errorf(sandbox.ErrLimit, "too_many_entries", "more than %d entries: list less deep, or a smaller directory", e2bMaxEntries)
		}
		for _, e := range entries {
			out = append(out, e)
			if e.Type == sandbox.FileDir && depth > 1 {
				if err := walk(e.Path, depth-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(dir, depth)
}

// e2bMakeDir is filesystem.Filesystem/MakeDir: one that exists is
// already_exists, as the SDKs expect (makeDir answers false then).
func (s *Server) e2bMakeDir(ctx context.Context, req *e2b.PathRequest) (*e2b.EntryResponse, error) {
	f, p, release, err := s.e2bAt(ctx, req.Path)
	defer release()
	if err != nil {
		return nil, err
	}
	if _, err := f.Stat(ctx, p); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s exists", req.Path))
	}
	if err := f.Mkdir(ctx, p); err != nil {
		return nil, e2bErr(err)
	}
	fi, err := f.Stat(ctx, p)
	if err != nil {
		return nil, e2bErr(err)
	}
	return &e2b.EntryResponse{Entry: e2bEntry(fi)}, nil
}

// e2bRemove is filesystem.Filesystem/Remove.
func (s *Server) e2bRemove(ctx context.Context, req *e2b.PathRequest) (*e2b.Empty, error) {
	f, p, release, err := s.e2bAt(ctx, req.Path)
	defer release()
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the work dir itself cannot be removed"))
	}
	if _, err := f.Stat(ctx, p); err != nil {
		return nil, e2bErr(err)
	}
	return &e2b.Empty{}, e2bErr(f.Remove(ctx, p))
}

// e2bMove is filesystem.Filesystem/Move, which execbox's file operations
// do not have yet.
func (s *Server) e2bMove(ctx context.Context, req *e2b.MoveRequest) (*e2b.EntryResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("execbox's file operations cannot rename yet: run mv with commands.run"))
}

// e2bWatch is filesystem.Filesystem/WatchDir: the start event, then the
// changes seen under the directory, found by comparing listings every
// e2bWatchEvery (a file created and removed in between is not seen).
func (s *Server) e2bWatch(ctx context.Context, req *e2b.WatchDirRequest, stream *connect.ServerStream[e2b.WatchDirResponse]) error {
	c := e2bCallOf(ctx)
	f, p, release, err := s.e2bAt(ctx, req.Path)
	release() // a watch counts against the token's rate, not its calls in flight: it lasts
	if err != nil {
		return err
	}
	if fi, err := f.Stat(ctx, p); err != nil {
		return e2bErr(err)
	} else if fi.Type != sandbox.FileDir {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", req.Path))
	}
	c.sb.mu.Lock()
	if c.sb.watches >= e2bMaxWatches {
		c.sb.mu.Unlock()
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the sandbox has %d watches open, the most it may", e2bMaxWatches))
	}
	if s.e2b.watches.Add(1) > e2bMaxWatchesAll {
		s.e2b.watches.Add(-1)
		c.sb.mu.Unlock()
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the server has %d watches open, the most it keeps; try again later", e2bMaxWatchesAll))
	}
	c.sb.watches++
	c.sb.mu.Unlock()
	defer func() {
		s.e2b.watches.Add(-1)
		c.sb.mu.Lock()
		c.sb.watches--
		c.sb.mu.Unlock()
	}()
	depth := 1
	if req.Recursive {
		depth = e2bMaxDepth
	}
	snapshot := func() (map[string]sandbox.FileInfo, error) {
		list, err := e2bWalk(ctx, f, p, depth)
		m := make(map[string]sandbox.FileInfo, len(list))
		for _, fi := range list {
			m[fi.Path] = fi
		}
		return m, err
	}
	last, err := snapshot()
	if err != nil {
		return e2bErr(err)
	}
	if err := stream.Send(&e2b.WatchDirResponse{Start: &e2b.Empty{}}); err != nil {
		return err
	}
	tick := time.NewTicker(e2bWatchEvery)
	defer tick.Stop()
	quiet := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil // the SDKs end a watch by its timeout
		case <-tick.C:
		}
		now, err := snapshot()
		if err != nil {
			return e2bErr(err)
		}
		var events []e2b.FilesystemEvent
		rel := func(q string) string { return strings.TrimPrefix(strings.TrimPrefix(q, p), "/") }
		for q, fi := range now {
			old, ok := last[q]
			switch {
			case !ok:
				events = append(events, e2b.FilesystemEvent{Name: rel(q), Type: e2b.EventCreate})
			case old.Size != fi.Size || !old.ModTime.Equal(fi.ModTime):
				events = append(events, e2b.FilesystemEvent{Name: rel(q), Type: e2b.EventWrite})
			case old.Mode != fi.Mode:
				events = append(events, e2b.FilesystemEvent{Name: rel(q), Type: e2b.EventChmod})
			}
		}
		for q := range last {
			if _, ok := now[q]; !ok {
				events = append(events, e2b.FilesystemEvent{Name: rel(q), Type: e2b.EventRemove})
			}
		}
		last = now
		if len(events) == 0 && time.Since(quiet) < e2bKeepalive {
			continue
		}
		c.extend(s)
		if len(events) == 0 {
			if err := stream.Send(&e2b.WatchDirResponse{Keepalive: &e2b.Empty{}}); err != nil {
				return err
			}
		}
		for i := range events {
			if err := stream.Send(&e2b.WatchDirResponse{Filesystem: &events[i]}); err != nil {
				return err
			}
		}
		quiet = time.Now()
	}
}

// e2bDownload is GET /files?path=: the file's bytes.
func (s *Server) e2bDownload(w http.ResponseWriter, r *http.Request) {
	p, err := e2bPath(r.URL.Query().Get("path"))
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	f, release, err := s.e2bFiles(r.Context())
	defer release()
	if err == nil {
		var fi sandbox.FileInfo
		if fi, err = f.Stat(r.Context(), p); err == nil && fi.Type != sandbox.FileRegular {
			err = sandbox.Errorf(sandbox.ErrInvalid, "not_a_file", "%s is not a regular file", r.URL.Query().Get("path"))
		}
	}
	if err != nil {
		writeProblem(w, r, problemOf(r, err))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	f.GetFile(r.Context(), p, w, e2bCallOf(r.Context()).sess.Info().Limits.WorkSize) // a failure after the first byte can only cut the body
}

// e2bUpload is POST /files: a multipart body's files, each at the path
// query's path when one is given, else at its filename's.
func (s *Server) e2bUpload(w http.ResponseWriter, r *http.Request) {
	c := e2bCallOf(r.Context())
	x := s.begin(r, v1.OpSessionUpload)
	defer x.end()
	release, err := admitted(r)
	defer release()
	if err != nil {
		x.fail(w, err)
		return
	}
	sess := c.sess
	f, err := sess.Files()
	if err != nil {
		x.fail(w, err)
		return
	}
	x.uploadTo(sess)
	at := r.URL.Query().Get("path")
	files, ok := s.receive(w, r, x, sess, f, func(name string) (string, error) {
		return e2bPath(cmp.Or(at, name))
	})
	if !ok {
		return
	}
	out := make([]e2b.WrittenFile, 0, len(files))
	for _, fi := range files {
		out = append(out, e2b.WrittenFile{Name: path.Base(fi.Path), Type: "file", Path: path.Join(e2bWorkDir, fi.Path)})
	}
	writeJSON(w, http.StatusOK, out)
}
