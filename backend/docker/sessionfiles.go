package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/sandbox"
)

// A session's files (sandbox.Files) are read and changed by small shell
// helpers, each an exec of its own in the container, as the sandbox user:
// not through the keeper or the wrapper, which kill every process of the
// container but the keeper before and after a program (a Files method may
// run while an Exec runs, which that would kill). Each helper walks from
// /work one directory at a time with `cd -P`, refusing a symlink or a
// non-directory and checking that $PWD is where the name says (so that a
// directory swapped for a symlink between the check and the cd is caught);
// the last component is checked before it is used and opened without
// following a symlink where it is opened (dd iflag=nofollow, conv=excl).
// The helper's exit status says which typed error it is.
//
// The helpers need GNU coreutils and findutils (dd iflag=nofollow,
// truncate, mv -T, timeout, find -printf), as the execbox-python image and
// python:3-slim have.

const (
	// xferTimeout bounds a PutFile or GetFile, which streams from or to the
	// caller at the caller's pace; the other methods get opTimeout.
	xferTimeout = 10 * time.Minute
	// maxFileArg keeps max+1 from overflowing.
	maxFileArg = 1 << 62
)

// filesHelper is files.sh: run as `sh -c filesHelper execbox OP ARG LAST
// DIRS...`, what it does and its exit statuses are said there.
//
//go:embed files.sh
var filesHelper string

// errInterrupted is a helper killed from outside: by the kill of every
// process that starts and ends each Exec, or by the program.
var errInterrupted = errors.New("interrupted")

// helper runs args in c as the sandbox user through an exec of its own
// (never the keeper: see filesHelper), with stdin (if not nil) streamed
// to it and its stdout streamed to stdout; it returns the exit status and
// the first 4 KiB of stderr. The helper runs under timeout(1) a little
// longer than timeout, so that it ends even when the engine does not end
// it once execbox stops reading. err is errInterrupted for a helper
// killed by SIGKILL from outside.
func (b *Backend) helper(ctx context.Context, c *ctr, args []string, stdin io.Reader, stdout io.Writer, timeout time.Duration) (code int, stderr string, err error) {
	defer b.timed("helper")()
	if why := c.deadReason(); why != "" {
		return -1, "", sandbox.Errorf(sandbox.ErrInternal, "container_gone", "container %s was %s", c.name, why)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := []string{"/usr/bin/env", "-i", "PATH=" + sandboxPATH, "LC_ALL=C",
		"timeout", "-s", "KILL", strconv.Itoa(int((timeout + 5*time.Second) / time.Second))}
	cmd = append(cmd, args...)
	// Stdin is always attached (and closed at once when there is none):
	// an exec without one gets the host's /dev/null from the runtime's
	// shim, and runsc (docker.runtime) chowns it to the sandbox's user.
	ex, err := b.cli.ExecCreate(tctx, c.id, client.ExecCreateOptions{
		Cmd: cmd, User: sandboxUser, WorkingDir: workDir,
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, "", b.helperFailed(ctx, tctx, c, err, "creating an exec in")
	}
	hj, err := b.cli.ExecAttach(tctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, "", b.helperFailed(ctx, tctx, c, err, "starting an exec in")
	}
	defer hj.Close()
	fed := make(chan struct{})
	if stdin != nil {
		go func() {
			defer close(fed)
			io.Copy(hj.Conn, stdin)
			hj.CloseWrite()
		}()
	} else {
		hj.CloseWrite()
		close(fed)
	}
	errs := sandbox.NewCapture(4*sandbox.KiB, nil, nil)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, errs, hj.Reader)
		copied <- err
	}()
	var cerr error
	select {
	case cerr = <-copied:
	case <-tctx.Done():
		hj.Close()
		<-copied
		cerr = tctx.Err()
	}
	hj.Close()
	// The copy of stdin ends at its next write now; a reader that blocks
	// is given a moment, not forever.
	select {
	case <-fed:
	case <-time.After(grace):
	}
	stderr = string(errs.Bytes())
	if cerr != nil {
		return -1, stderr, b.helperFailed(ctx, tctx, c, cerr, "streaming an exec in")
	}
	// The engine has the exit code; it may trail the stream by a moment.
	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer icancel()
	for range 200 {
		in, err := b.cli.ExecInspect(ictx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, stderr, b.helperFailed(ctx, ictx, c, err, "inspecting an exec in")
		}
		if !in.Running {
			if in.ExitCode == 128+9 {
				return in.ExitCode, stderr, errInterrupted
			}
			return in.ExitCode, stderr, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return -1, stderr, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "a file helper in container %s did not end after its output did", c.name)
}

// helperFailed is the error of a helper that could not run or finish:
// the caller's cancel stays itself (or is the cause it was cancelled
// with: sandbox_closed when Close ended it), the helper's own deadline is ErrLimit
// "timeout", an engine or container fault is as execFailed says.
func (b *Backend) helperFailed(ctx, tctx context.Context, c *ctr, err error, doing string) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s container %s: %w", doing, c.name, context.Cause(ctx))
	case tctx.Err() != nil:
		return sandbox.Errorf(sandbox.ErrLimit, "timeout", "%s container %s: the file operation did not end in time", doing, c.name)
	}
	return b.execFailed(c, err, doing)
}

// fileOp is one call of filesHelper.
type fileOp struct {
	op, arg string
	path    string // relative to /work, "" for /work itself
	stdin   io.Reader
	stdout  io.Writer
	timeout time.Duration
}

// args are filesHelper's arguments: OP ARG LAST DIRS...
func (o fileOp) args() []string {
	a := []string{"/bin/sh", "-c", filesHelper, "execbox", o.op, o.arg}
	if o.path == "" {
		return append(a, "")
	}
	parts := strings.Split(o.path, "/")
	a = append(a, parts[len(parts)-1])
	return append(a, parts[:len(parts)-1]...)
}

// runFileOp runs o and turns its exit status into a typed error.
func (s *Sandbox) runFileOp(ctx context.Context, o fileOp) error {
	if o.timeout == 0 {
		o.timeout = opTimeout
	}
	code, stderr, err := s.b.helper(ctx, s.c, o.args(), o.stdin, o.stdout, o.timeout)
	if errors.Is(err, errInterrupted) {
		return sandbox.Errorf(sandbox.ErrBusy, "file_op_interrupted",
			"%s %q in sandbox %s: the file helper was killed (an Exec started or ended while it ran, or the program killed it); retry", o.op, o.path, s.id)
	}
	if err != nil {
		return err
	}
	return s.fileErr(o.op, o.path, code, stderr)
}

// retryFileOp runs o again (a few times) when it was interrupted and again
// says whether that is safe: nothing of it was irreversible.
func (s *Sandbox) retryFileOp(ctx context.Context, o fileOp, again func() bool) error {
	for i := 0; ; i++ {
		err := s.runFileOp(ctx, o)
		if i == 3 || !errors.Is(err, sandbox.ErrBusy) || (again != nil && !again()) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
}

// fileErr is the error for filesHelper's exit status code.
func (s *Sandbox) fileErr(op, p string, code int, stderr string) error {
	msg := strings.TrimSpace(stderr)
	switch code {
	case 0:
		return nil
	case 3:
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: passes through a symlink or a non-directory, or is a symlink", p)
	case 4:
		return sandbox.Errorf(sandbox.ErrNotFound, "file_not_found", "path %q: no such file or directory in the work dir", p)
	case 5:
		return sandbox.Errorf(sandbox.ErrInvalid, "not_a_file", "path %q: not a regular file", p)
	case 6:
		return sandbox.Errorf(sandbox.ErrInvalid, "not_a_dir", "path %q: not a directory", p)
	case 8:
		return s.fileTooLarge(p)
	case 10:
		return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "path %q: the content did not arrive whole; nothing was written", p)
	case 11:
		return sandbox.Errorf(sandbox.ErrDenied, "permission_denied", "path %q: permission denied (the program changed its mode?)", p)
	}
	switch {
	case strings.Contains(msg, "No space left on device"), strings.Contains(msg, "Disk quota exceeded"):
		return sandbox.Errorf(sandbox.ErrLimit, "work_size_exceeded", "%s %q: the work dir is full (limits.work_size %d)", op, p, s.spec.Limits.WorkSize)
	case strings.Contains(msg, "File too large"):
		return s.fileTooLarge(p)
	case strings.Contains(msg, "Too many levels of symbolic links"):
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: became a symlink", p)
	case strings.Contains(msg, "No such file or directory"), strings.Contains(msg, "File exists"):
		// Removed (by the program) while the helper was on its way, or
		// made and removed again between its mkdir and its look.
		return sandbox.Errorf(sandbox.ErrNotFound, "file_not_found", "%s %q: removed by the program while it ran", op, p)
	case strings.Contains(msg, "Permission denied"), strings.Contains(msg, "Operation not permitted"):
		return sandbox.Errorf(sandbox.ErrDenied, "permission_denied", "%s %q: permission denied (the program changed a mode?): %s", op, p, clipStderr(msg))
	}
	return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "%s %q in container %s: exit %d: %s", op, p, s.c.name, code, clipStderr(msg))
}

func (s *Sandbox) fileTooLarge(p string) error {
	return sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "path %q: larger than the largest file the sandbox may hold (limits.file_size %d)", p, s.spec.Limits.FileSize)
}

func clipStderr(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

// beginFiles registers a Files call with the lifecycle and returns a
// context that ends when the call returns or the sandbox's Close begins
// (Close waits for registered calls, and a transfer may last long).
func (s *Sandbox) beginFiles(ctx context.Context) (context.Context, func(), error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return nil, nil, err
	}
	if why := s.c.deadReason(); why != "" {
		end()
		return nil, nil, sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	return ctx, end, nil
}

// checkFilesPath checks p, or, where the work dir is meant and allowed, "".
func checkFilesPath(p string, workDirOK bool) error {
	if p == "" && workDirOK {
		return nil
	}
	return sandbox.CheckPath(p)
}

func checkFilesMax(max int64) error {
	if max < 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "max %d: must not be negative", max)
	}
	return nil
}

// filesChanged marks /work as changed by a Files call: what WriteFiles knew
// of it (fresh) no longer holds.
func (s *Sandbox) filesChanged() {
	s.mu.Lock()
	s.fresh = false
	s.mu.Unlock()
}

// PutFile streams r (at most max bytes) to a temporary file next to path
// and renames it over path once all of it arrived: a cut stream, a read
// error or more than max bytes leave path as it was. The file becomes
// part of the Artifacts baseline, as a file of WriteFiles does.
func (s *Sandbox) PutFile(ctx context.Context, p string, r io.Reader, max int64) (int64, error) {
	defer s.b.timed("PutFile")()
	if err := checkFilesPath(p, false); err != nil {
		return 0, err
	}
	if err := checkFilesMax(max); err != nil {
		return 0, err
	}
	max = min(max, maxFileArg)
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	s.filesChanged()
	tmp, tok := token(), token()+token()
	ps := &putStream{head: []byte(tok + "\n"), r: io.LimitReader(r, max+1), tail: []byte(tok), max: max, sum: sha256.New()}
	err = s.runFileOp(ctx, fileOp{op: "put", arg: tmp, path: p, stdin: ps, timeout: xferTimeout})
	ps.mu.Lock()
	n, over, rerr, sent := ps.n, ps.over, ps.err, ps.phase == 3
	ps.mu.Unlock()
	switch sandbox.CodeOf(err) {
	case "", "path_invalid", "not_a_file", "file_not_found":
		// Done, or refused before the temporary file was made (or
		// after its directory was removed).
	default:
		// Killed, cut off, or failed: the helper may have left its
		// temporary file.
		s.cleanPut(ctx, p, tmp)
	}
	switch {
	case over:
		return 0, sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "path %q: more than %d bytes", p, max)
	case rerr != nil:
		var se *sandbox.Error
		if errors.As(rerr, &se) || errors.Is(rerr, context.Canceled) || errors.Is(rerr, context.DeadlineExceeded) {
			return 0, fmt.Errorf("reading the content of %q: %w", p, rerr)
		}
		return 0, sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "reading the content of %q: %w", p, rerr)
	case err != nil:
		return 0, err
	case !sent:
		return 0, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "path %q: the helper ended before it read all of the content", p)
	}
	s.mu.Lock()
	s.workEmpty = false
	if s.base == nil {
		s.base = map[string]fileSummary{}
	}
	s.base[p] = fileSummary{size: n, sum: [sha256.Size]byte(ps.sum.Sum(nil))}
	s.mu.Unlock()
	return n, nil
}

// cleanPut removes a temporary file PutFile may have left.
func (s *Sandbox) cleanPut(ctx context.Context, p, tmp string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	s.retryFileOp(ctx, fileOp{op: "clean", arg: tmp, path: p}, nil)
}

// putStream is PutFile's stdin to the helper: the token line, the
// content (counted and hashed), then the token again, which the helper
// takes as the sign that all of the content arrived. After more than max
// bytes or a read error it ends without the token.
type putStream struct {
	head, tail []byte
	r          io.Reader
	max        int64
	sum        hash.Hash

	mu    sync.Mutex
	phase int // 0 head, 1 content, 2 tail, 3 all sent, 4 ended without the tail
	n     int64
	over  bool
	err   error
}

func (ps *putStream) Read(b []byte) (int, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for {
		switch ps.phase {
		case 0:
			n := copy(b, ps.head)
			if ps.head = ps.head[n:]; len(ps.head) == 0 {
				ps.phase = 1
			}
			return n, nil
		case 1:
			// The caller's reader may block: not under mu, which
			// PutFile takes once the helper ended.
			ps.mu.Unlock()
			n, err := ps.r.Read(b)
			ps.mu.Lock()
			ps.n += int64(n)
			ps.sum.Write(b[:n])
			switch {
			case ps.n > ps.max:
				ps.over, ps.phase = true, 4
				return 0, io.EOF
			case err == io.EOF:
				ps.phase = 2
			case err != nil:
				ps.err, ps.phase = err, 4
				return 0, io.EOF
			}
			if n > 0 {
				return n, nil
			}
		case 2:
			n := copy(b, ps.tail)
			if ps.tail = ps.tail[n:]; len(ps.tail) == 0 {
				ps.phase = 3
			}
			return n, nil
		default:
			return 0, io.EOF
		}
	}
}

// GetFile streams the regular file at p to w: at most max bytes, and
// ErrLimit "file_too_large" when there was more.
func (s *Sandbox) GetFile(ctx context.Context, p string, w io.Writer, max int64) (int64, error) {
	defer s.b.timed("GetFile")()
	if err := checkFilesPath(p, false); err != nil {
		return 0, err
	}
	if err := checkFilesMax(max); err != nil {
		return 0, err
	}
	max = min(max, maxFileArg)
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	cw := &getWriter{w: w, max: max}
	err = s.retryFileOp(ctx, fileOp{op: "get", arg: strconv.FormatInt(max+1, 10), path: p, stdout: cw, timeout: xferTimeout},
		func() bool { return cw.total == 0 })
	switch {
	case err != nil:
		return cw.n, err
	case cw.err != nil:
		return cw.n, fmt.Errorf("writing the content of %q: %w", p, cw.err)
	case cw.total > max:
		return cw.n, sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "path %q: more than %d bytes", p, max)
	}
	return cw.n, nil
}

// getWriter passes at most max bytes to w and counts the rest; once w
// failed it only counts (the helper's output is bounded: max+1 bytes).
type getWriter struct {
	w        io.Writer
	max      int64
	n, total int64
	err      error
}

func (c *getWriter) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if c.err != nil {
		return len(p), nil
	}
	q := p[:min(int64(len(p)), c.max-c.n)]
	if len(q) > 0 {
		m, err := c.w.Write(q)
		c.n += int64(m)
		if err == nil && m < len(q) {
			err = io.ErrShortWrite
		}
		c.err = err
	}
	return len(p), nil
}

// Stat describes the entry at p ("" for the work dir) without following
// a symlink.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	defer s.b.timed("Stat")()
	if err := checkFilesPath(p, true); err != nil {
		return sandbox.FileInfo{}, err
	}
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer done()
	var out bytes.Buffer
	lim := &headWriter{w: &out, n: 4 * sandbox.KiB}
	again := func() bool {
		out.Reset()
		lim.n = 4 * sandbox.KiB
		return true
	}
	if err := s.retryFileOp(ctx, fileOp{op: "stat", arg: "-", path: p, stdout: lim}, again); err != nil {
		return sandbox.FileInfo{}, err
	}
	rec, ok := bytes.CutSuffix(out.Bytes(), []byte{0})
	if !ok || bytes.IndexByte(rec, 0) >= 0 {
		return sandbox.FileInfo{}, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "stat %q in container %s: unexpected output %q", p, s.c.name, clipStderr(out.String()))
	}
	fi, _, err := parseFindEntry(string(rec), false)
	if err != nil {
		return sandbox.FileInfo{}, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "stat %q in container %s: %w", p, s.c.name, err)
	}
	fi.Path = p
	return fi, nil
}

// headWriter keeps the first n bytes written to it.
type headWriter struct {
	w io.Writer
	n int64
}

func (l *headWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		q := p[:min(int64(len(p)), l.n)]
		l.w.Write(q)
		l.n -= int64(len(q))
	}
	return len(p), nil
}

// List describes the entries of dir ("" for the work dir), sorted by
// name, at most max of them. The listing streams: only about 2·max
// entries are held at a time, however many the directory has.
func (s *Sandbox) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	defer s.b.timed("List")()
	if err := checkFilesPath(dir, true); err != nil {
		return nil, false, err
	}
	if max < 0 {
		return nil, false, sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "max %d: must not be negative", max)
	}
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	l := &dirLister{dir: dir, max: max}
	err = s.retryFileOp(ctx, fileOp{op: "list", arg: "-", path: dir, stdout: l}, func() bool {
		*l = dirLister{dir: dir, max: max}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	if l.err != nil {
		return nil, false, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "listing %q in container %s: %w", dir, s.c.name, l.err)
	}
	entries, truncated := l.result()
	return entries, truncated, nil
}

// dirLister parses the list helper's records as they stream and keeps the
// max entries first by name.
type dirLister struct {
	dir     string
	max     int
	entries []sandbox.FileInfo
	total   int
	part    []byte // a record not yet ended
	err     error
}

// maxRecord bounds one record: a name of 255 bytes and the fields.
const maxRecord = 1024

func (l *dirLister) Write(p []byte) (int, error) {
	n := len(p)
	for l.err == nil && len(p) > 0 {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			if len(l.part)+len(p) > maxRecord {
				l.err = fmt.Errorf("a record longer than %d bytes", maxRecord)
				break
			}
			l.part = append(l.part, p...)
			break
		}
		rec := p[:i]
		if len(l.part) > 0 {
			rec = append(l.part, rec...)
		}
		p = p[i+1:]
		fi, name, err := parseFindEntry(string(rec), true)
		l.part = l.part[:0]
		if err != nil {
			l.err = err
			break
		}
		fi.Path = path.Join(l.dir, name)
		l.add(fi)
	}
	return n, nil
}

func (l *dirLister) add(fi sandbox.FileInfo) {
	l.total++
	l.entries = append(l.entries, fi)
	if len(l.entries) >= 2*l.max+64 {
		l.trim()
	}
}

func (l *dirLister) trim() {
	slices.SortFunc(l.entries, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	if len(l.entries) > l.max {
		clear(l.entries[l.max:])
		l.entries = l.entries[:l.max]
	}
}

func (l *dirLister) result() ([]sandbox.FileInfo, bool) {
	if l.err == nil && len(l.part) > 0 {
		l.err = errors.New("the listing ended inside a record")
	}
	l.trim()
	entries := l.entries
	if entries == nil {
		entries = []sandbox.FileInfo{}
	}
	return entries, l.total > len(entries)
}

// parseFindEntry parses TYPE|SIZE|MODE|MTIME (and |NAME when named) as find
// -printf '%y|%s|%m|%T@' prints them.
func parseFindEntry(rec string, named bool) (sandbox.FileInfo, string, error) {
	n := 4
	if named {
		n = 5
	}
	f := strings.SplitN(rec, "|", n)
	if len(f) != n || (named && (f[4] == "" || strings.Contains(f[4], "/"))) {
		return sandbox.FileInfo{}, "", fmt.Errorf("malformed entry %q", rec)
	}
	var fi sandbox.FileInfo
	switch f[0] {
	case "f":
		fi.Type = sandbox.FileRegular
	case "d":
		fi.Type = sandbox.FileDir
	case "l":
		fi.Type = sandbox.FileSymlink
	default:
		fi.Type = sandbox.FileOther
	}
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	mode, err2 := strconv.ParseUint(f[2], 8, 32)
	mtime, err3 := parseFindTime(f[3])
	if err := errors.Join(err1, err2, err3); err != nil {
		return sandbox.FileInfo{}, "", fmt.Errorf("malformed entry %q: %w", rec, err)
	}
	fi.Size, fi.Mode, fi.ModTime = size, uint32(mode)&0o7777, mtime
	if named {
		return fi, f[4], nil
	}
	return fi, "", nil
}

// parseFindTime parses find's %T@, seconds since the epoch with a fraction
// ("1796132271.7465140320").
func parseFindTime(s string) (time.Time, error) {
	secs, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(secs, "-")
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var ns int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, err
		}
		if neg {
			ns = -ns
		}
	}
	return time.Unix(sec, ns), nil
}

// Remove removes the entry at p, a directory with everything in it; a
// symlink is removed, never followed.
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	defer s.b.timed("Remove")()
	if err := checkFilesPath(p, false); err != nil {
		return err
	}
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return err
	}
	defer done()
	s.filesChanged()
	retried := false
	err = s.retryFileOp(ctx, fileOp{op: "remove", arg: "-", path: p}, func() bool {
		retried = true
		return true
	})
	notFound := sandbox.CodeOf(err) == "file_not_found"
	if notFound && retried {
		err = nil // the interrupted helper had removed it
	}
	if err != nil && !notFound {
		return err
	}
	// What was removed is no longer part of the Artifacts baseline: a
	// file the program makes there again is new.
	s.mu.Lock()
	for k := range s.base {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(s.base, k)
		}
	}
	s.mu.Unlock()
	return err
}

// Mkdir creates the directory p and its missing parents; one that exists
// is no error.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	defer s.b.timed("Mkdir")()
	if err := checkFilesPath(p, false); err != nil {
		return err
	}
	ctx, done, err := s.beginFiles(ctx)
	if err != nil {
		return err
	}
	defer done()
	s.filesChanged()
	if err := s.retryFileOp(ctx, fileOp{op: "mkdir", arg: "-", path: p}, nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.workEmpty = false
	s.mu.Unlock()
	return nil
}

// Interface guard.
var _ sandbox.Files = (*Sandbox)(nil)
