package docker

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one hardened container (its own, or a reused one leased for
// the sandbox's lifetime) with a tmpfs work dir at /work.
type Sandbox struct {
	b    *Backend
	id   string
	spec sandbox.Spec
	c    *ctr

	life sandbox.Lifecycle // operations, for Close

	// mu guards the fields below, and serialises WriteFiles and Artifacts,
	// which may overlap an Exec (see package sandbox).
	mu sync.Mutex
	// fresh: no program has run since the work dir was emptied, so it
	// holds only what WriteFiles put there (no symlink can be in it).
	fresh bool
	// workEmpty: /work holds nothing (nothing was written, and the last
	// program's wrapper found it empty).
	workEmpty bool
	known     map[string]bool        // while fresh: path → is a directory
	base      map[string]fileSummary // the baseline for Artifacts
}

// fileSummary identifies a regular file's content.
type fileSummary struct {
	size int64
	sum  [sha256.Size]byte
}

func (s *Sandbox) ID() string { return s.id }

// Exec runs p in the container under the wrapper (see wrapper): through
// the keeper, or, when p.Stdin is a stream whose length is not known (or
// is too long to pass through /tmp), through an exec.
func (s *Sandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	defer s.b.timed("Exec")()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end, err := s.life.BeginExec(s.id, cancel) // one Exec at a time
	if err != nil {
		return nil, err
	}
	defer end()
	if why := s.c.deadReason(); why != "" {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	// A lasting process keeps the container's CPU time rlimit, set when
	// it was made (a process cannot raise its hard limit).
	l := p.LimitsFor(s.spec.Limits)
	fixed := map[string]string{"HOME": workDir, "TMPDIR": tmpDir, "PATH": sandboxPATH}
	e := execSpec{
		env:  sandbox.BuildEnv(os.Environ(), s.spec.Policy, fixed, s.spec.Env, p.Env),
		dir:  workDir,
		args: p.Args,
		wall: l.Wall,
	}
	if p.Dir != "" {
		e.dir = path.Join(workDir, p.Dir)
	}
	if p.Stdin != nil {
		if n, ok := p.Stdin.(interface{ Len() int }); ok && int64(n.Len()) <= s.maxInline() {
			data, err := io.ReadAll(p.Stdin)
			if err != nil {
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "stdin_failed", "reading the process's stdin: %w", err)
			}
			e.stdin = data
		} else {
			e.stream, e.streamed = p.Stdin, true
		}
	}
	stdout, stderr, overflow := sandbox.NewOutputs(l.Output, l.OutputLimitKill, p.Stdout, p.Stderr)
	if p.Lasting {
		stdout.TeeAll()
		stderr.TeeAll()
	}
	e.stdout, e.stderr, e.overflow = stdout, stderr, overflow
	if ctx.Err() != nil {
		return s.canceled(), nil
	}
	s.mu.Lock()
	s.fresh = false // from here on the program may plant symlinks
	wasEmpty := s.workEmpty
	s.workEmpty = false
	s.mu.Unlock()
	started := time.Now()
	out, err := s.b.run(ctx, s.c, e)
	if err != nil {
		if ctx.Err() != nil {
			return s.canceled(), nil
		}
		return nil, err
	}
	s.mu.Lock()
	if out.have && out.tr.err != "" {
		s.workEmpty = wasEmpty // nothing ran
		s.mu.Unlock()
		return s.notStarted(out, p, stdout, stderr)
	}
	s.workEmpty = out.have && out.tr.work == 0
	s.mu.Unlock()
	res := s.resultOf(ctx, out, started, stdout, stderr)
	if l.OutputLimitKill && (res.StdoutTruncated || res.StderrTruncated) &&
		(res.Reason == sandbox.ReasonExited || res.Reason == sandbox.ReasonSignaled) {
		// Past the cap, it ended by itself before the kill landed: the
		// reason must not depend on which was faster.
		res.Reason = sandbox.ReasonOutputLimit
	}
	return res, nil
}

// maxInline is the longest stdin passed through the keeper (it goes
// through a file in /tmp, which the program's tmp_size pays for while the
// program runs); a longer one, or a stream, goes through an exec.
func (s *Sandbox) maxInline() int64 {
	return min(sandbox.MiB, s.spec.Limits.TmpSize/4)
}

func (s *Sandbox) canceled() *sandbox.Result {
	return &sandbox.Result{ID: s.id, Backend: Name, Isolation: s.b.iso, Reason: sandbox.ReasonCanceled, ExitCode: -1,
		Enforcement: enforcement, Message: "cancelled before the program started"}
}

// WriteFiles writes files into /work with one archive upload, after checking
// every path and (once a program has run) that no path passes through a
// symlink or a non-directory the program made.
func (s *Sandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	defer s.b.timed("WriteFiles")()
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	if why := s.c.deadReason(); why != "" {
		return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeFiles(ctx, files)
}

// Artifacts returns the regular files of /work created or changed since the
// last WriteFiles, read from one archive download; symlinks and special
// files are listed in Skipped, never followed or opened.
func (s *Sandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	defer s.b.timed("Artifacts")()
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	if why := s.c.deadReason(); why != "" {
		return sandbox.Artifacts{}, sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.base) == 0 && s.workEmpty {
		// Nothing was there before, and the wrapper found nothing after
		// the last program: no archive (tens of milliseconds) to read.
		return sandbox.Artifacts{}, nil
	}
	return s.collect(ctx, s.spec.Limits.ArtifactFiles, s.spec.Limits.ArtifactBytes)
}

// Close ends a running Exec and retires the container (nothing of it runs
// when Close returns; the engine removes it with its volume), or wipes a
// reused container and gives it back to its scope's pool.
func (s *Sandbox) Close(ctx context.Context) error {
	defer s.b.timed("Close")()
	if !s.life.Close() {
		return nil
	}
	if s.c.reused {
		return s.b.release(ctx, s.c)
	}
	err := s.b.retire(ctx, s.c)
	s.b.warm.replenish(s.spec)
	return err
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
