package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/sandbox"
)

const (
	// longPath is the length from which a file is written by an exec
	// instead of the archive upload: the engine extracts with whole paths,
	// and /work/ plus a path near PATH_MAX does not fit in one.
	longPath = 2048
	// maxEntries and maxDepth bound what Artifacts visits, as in internal/host/workdir.
	maxEntries = 100_000
	maxDepth   = 64
)

// writeLong writes one file whose path is too long for the archive upload:
// it walks there one directory at a time (refusing a symlink or a
// non-directory on the way) and writes stdin to the file.
const writeLong = `set -e
f=$1; shift
for d; do
	if [ -L "$d" ]; then exit 3; fi
	if [ -e "$d" ] && [ ! -d "$d" ]; then exit 3; fi
	mkdir -p -- "$d"; cd -P -- "$d"
done
if [ -L "$f" ] || [ -d "$f" ]; then exit 3; fi
cat > "$f"`

func (s *Sandbox) writeFiles(ctx context.Context, files map[string][]byte) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		if err := sandbox.CheckPath(p); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	if err := s.checkPaths(ctx, paths); err != nil {
		return err
	}
	var short, long []string
	for _, p := range paths {
		if len(p) >= longPath {
			long = append(long, p)
		} else {
			short = append(short, p)
		}
	}
	if len(short) > 0 {
		var buf bytes.Buffer
		if err := writeTar(&buf, short, files); err != nil {
			return sandbox.Errorf(sandbox.ErrInternal, "archive_failed", "packing the files: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := s.b.cli.CopyToContainer(ctx, s.c.id, client.CopyToContainerOptions{
			DestinationPath: workDir, Content: &buf,
		})
		cancel()
		if err != nil {
			return s.b.wrap(err, "copying files into container "+s.c.name)
		}
	}
	for _, p := range long {
		parts := strings.Split(p, "/")
		cmd := append([]string{"/bin/sh", "-c", writeLong, "execbox", parts[len(parts)-1]}, parts[:len(parts)-1]...)
		// Through an exec of its own, never the keeper (whose run first
		// kills what runs: a session's agent).
		code, out, err := s.b.helper(ctx, s.c, cmd, bytes.NewReader(files[p]), nil, opTimeout)
		if err != nil {
			return err
		}
		switch code {
		case 0:
		case 3:
			return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: passes through a symlink or a non-directory", p)
		default:
			return sandbox.Errorf(sandbox.ErrInternal, "write_failed", "writing %q in container %s: exit %d: %s", p, s.c.name, code, out)
		}
	}
	return s.rebase(ctx, paths, files)
}

// checkPaths refuses, before anything is written, a path that would pass
// through a symlink or a non-directory, or replace a directory. While the
// sandbox is fresh only WriteFiles has written, so what is there is known;
// afterwards every prefix that exists is asked of the engine.
func (s *Sandbox) checkPaths(ctx context.Context, paths []string) error {
	type state struct {
		exists, dir, link bool
	}
	seen := map[string]state{}
	lookup := func(p string) (state, error) {
		if st, ok := seen[p]; ok {
			return st, nil
		}
		var st state
		if s.fresh {
			dir, ok := s.known[p]
			st = state{exists: ok, dir: dir}
		} else if len(p) < longPath {
			ctx, cancel := context.WithTimeout(ctx, opTimeout)
			r, err := s.b.cli.ContainerStatPath(ctx, s.c.id, client.ContainerStatPathOptions{Path: path.Join(workDir, p)})
			cancel()
			switch {
			case cerrdefs.IsNotFound(err):
			case err != nil:
				return st, s.b.wrap(err, "checking "+p+" in container "+s.c.name)
			default:
				m := r.Stat.Mode
				st = state{exists: true, dir: m.IsDir(), link: m&fs.ModeSymlink != 0}
			}
		}
		seen[p] = st
		return st, nil
	}
	for _, p := range paths {
		parts := strings.Split(p, "/")
		for i := range parts {
			sub := strings.Join(parts[:i+1], "/")
			if len(sub) >= longPath {
				break // the exec writer checks the rest itself
			}
			st, err := lookup(sub)
			if err != nil {
				return err
			}
			last := i == len(parts)-1
			switch {
			case st.link:
				return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: passes through a symlink or a non-directory", p)
			case st.exists && !st.dir && !last:
				return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: passes through a symlink or a non-directory", p)
			case st.exists && st.dir && last:
				return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: is a directory", p)
			}
			if !st.exists {
				break // nothing below a missing prefix exists either
			}
		}
	}
	return nil
}

// writeTar packs paths (sorted) with their parent directories, all owned by
// the sandbox user, into one archive.
func writeTar(w io.Writer, paths []string, files map[string][]byte) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	now := time.Now()
	for _, p := range paths {
		parts := strings.Split(p, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/")
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Uid: 65534, Gid: 65534, ModTime: now}); err != nil {
				return err
			}
		}
		data := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(data)), Uid: 65534, Gid: 65534, ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// rebase makes the current state of /work the baseline for Artifacts. While
// fresh that is the old baseline plus what was just written; otherwise the
// work dir is read back.
func (s *Sandbox) rebase(ctx context.Context, paths []string, files map[string][]byte) error {
	if s.base == nil {
		s.base = map[string]fileSummary{}
	}
	if s.fresh {
		if s.known == nil {
			s.known = map[string]bool{}
		}
		for _, p := range paths {
			parts := strings.Split(p, "/")
			for i := 1; i < len(parts); i++ {
				s.known[strings.Join(parts[:i], "/")] = true
			}
			s.known[p] = false
			s.base[p] = fileSummary{size: int64(len(files[p])), sum: sha256.Sum256(files[p])}
		}
		return nil
	}
	base := map[string]fileSummary{}
	err := s.walk(ctx, func(rel string, h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		sum := sha256.New()
		n, err := io.Copy(sum, r)
		if err != nil {
			return err
		}
		base[rel] = fileSummary{size: n, sum: [sha256.Size]byte(sum.Sum(nil))}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	s.base = base
	return nil
}

// collect returns the regular files that differ from the baseline, in path
// order, within maxFiles and maxBytes.
func (s *Sandbox) collect(ctx context.Context, maxFiles int, maxBytes int64) (sandbox.Artifacts, error) {
	var out sandbox.Artifacts
	var total int64
	skip := func(rel, why string) { out.Skipped = append(out.Skipped, sandbox.Skipped{Path: rel, Reason: why}) }
	err := s.walk(ctx, func(rel string, h *tar.Header, r io.Reader) error {
		switch h.Typeflag {
		case tar.TypeReg:
		case tar.TypeSymlink:
			skip(rel, "symlink")
			return nil
		case tar.TypeLink:
			skip(rel, "hard link")
			return nil
		default:
			skip(rel, "not a regular file")
			return nil
		}
		var data []byte
		if b, ok := s.base[rel]; ok && b.size == h.Size {
			// Same size as before: only the content says whether it changed.
			buf, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if sha256.Sum256(buf) == b.sum {
				return nil
			}
			data = buf
		}
		switch {
		case len(out.Files) >= maxFiles:
			skip(rel, "file count limit")
			return nil
		case total+h.Size > maxBytes:
			skip(rel, "byte limit")
			return nil
		}
		if data == nil {
			var err error
			if data, err = io.ReadAll(io.LimitReader(r, h.Size)); err != nil {
				return err
			}
		}
		total += int64(len(data))
		out.Files = append(out.Files, sandbox.Artifact{Path: rel, Size: int64(len(data)), Mode: uint32(h.Mode & 0o7777), Data: data})
		return nil
	}, skip)
	return out, err
}

// walk downloads /work as an archive and calls visit for every entry below
// it but directories, with paths relative to /work. The archive never
// follows a symlink: the engine stores links as links.
func (s *Sandbox) walk(ctx context.Context, visit func(rel string, h *tar.Header, r io.Reader) error, skip func(rel, why string)) error {
	ctx, cancel := context.WithTimeout(ctx, 5*opTimeout)
	defer cancel()
	res, err := s.b.cli.CopyFromContainer(ctx, s.c.id, client.CopyFromContainerOptions{SourcePath: workDir + "/."})
	if err != nil {
		return s.b.wrap(err, "copying the work dir out of container "+s.c.name)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	seen := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return sandbox.Errorf(sandbox.ErrInternal, "archive_failed", "reading the work dir archive of container %s: %w", s.c.name, err)
		}
		rel := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if rel == "" || rel == "." {
			continue
		}
		if seen++; seen > maxEntries {
			if skip != nil {
				skip(rel, "entry count limit")
			}
			return nil
		}
		if strings.Count(rel, "/") >= maxDepth {
			if skip != nil {
				skip(rel, "directory depth limit")
			}
			continue
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if err := visit(rel, h, tr); err != nil {
			return fmt.Errorf("reading %q from the work dir archive: %w", rel, err)
		}
	}
}
