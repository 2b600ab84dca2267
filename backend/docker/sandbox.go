package docker

import (
	"context"
	"crypto/sha256"
	"os"
	"path"
	"sync"

	"github.com/moby/moby/client"

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

	// Used by the one goroutine that uses the sandbox (see package sandbox).
	// fresh: no program has run since the work dir was emptied, so it
	// holds only what WriteFiles put there (no symlink can be in it).
	fresh bool
	known map[string]bool        // while fresh: path → is a directory
	base  map[string]fileSummary // the baseline for Artifacts
}

// fileSummary identifies a regular file's content.
type fileSummary struct {
	size int64
	sum  [sha256.Size]byte
}

func (s *Sandbox) ID() string { return s.id }

// Exec runs p in the container through the wrapper (see wrapper).
func (s *Sandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.life.Begin(s.id, cancel); err != nil {
		return nil, err
	}
	defer s.life.Done()
	if why := s.c.deadReason(); why != "" {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	l := s.spec.Limits
	wall := p.WallLimit(l)
	fixed := map[string]string{"HOME": workDir, "TMPDIR": tmpDir, "PATH": sandboxPATH}
	env := sandbox.BuildEnv(os.Environ(), s.spec.Policy, fixed, s.spec.Env, p.Env)
	tok := token()
	dir := workDir
	if p.Dir != "" {
		dir = path.Join(workDir, p.Dir)
	}
	cmd := append([]string{"/usr/bin/env", "-i", "--"}, env...)
	cmd = append(cmd, "/bin/sh", "-c", wrapper, "execbox", tok, dir)
	cmd = append(cmd, p.Args...)

	overflow := make(chan struct{})
	var once sync.Once
	onOverflow := func() {
		if l.OutputLimitKill {
			once.Do(func() { close(overflow) })
		}
	}
	stdout := sandbox.NewCapture(l.Output, p.Stdout, onOverflow)
	stderr := sandbox.NewCapture(l.Output, p.Stderr, onOverflow)
	if ctx.Err() != nil {
		return s.canceled(), nil
	}
	s.fresh = false // from here on the program may plant symlinks
	end, err := s.b.runExec(ctx, s.c, execSpec{cmd: cmd, stdin: p.Stdin, stdout: stdout, stderr: stderr, wall: wall, overflow: overflow})
	if err != nil {
		if ctx.Err() != nil {
			return s.canceled(), nil
		}
		return nil, err
	}
	if msg, ok := notFound(end, tok, stdout, stderr); ok {
		if msg == "no such directory" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "dir_not_found", "process dir %q does not exist in the work dir", p.Dir)
		}
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "program %q not found in the sandbox's PATH (image %s)", p.Args[0], s.spec.Image)
	}
	return s.resultOf(ctx, end, stdout, stderr), nil
}

func (s *Sandbox) canceled() *sandbox.Result {
	return &sandbox.Result{ID: s.id, Backend: Name, Isolation: s.b.iso, Reason: sandbox.ReasonCanceled, ExitCode: -1,
		Enforcement: enforcement, Message: "cancelled before the program started"}
}

// WriteFiles writes files into /work with one archive upload, after checking
// every path and (once a program has run) that no path passes through a
// symlink or a non-directory the program made.
func (s *Sandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	if why := s.c.deadReason(); why != "" {
		return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	return s.writeFiles(ctx, files)
}

// Artifacts returns the regular files of /work created or changed since the
// last WriteFiles, read from one archive download; symlinks and special
// files are listed in Skipped, never followed or opened.
func (s *Sandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	if why := s.c.deadReason(); why != "" {
		return sandbox.Artifacts{}, sandbox.Errorf(sandbox.ErrInternal, "container_gone", "sandbox %s: its container %s was %s", s.id, s.c.name, why)
	}
	if len(s.base) == 0 && s.c.emptyWork >= 0 {
		// Nothing was there before: a stat (under a millisecond) instead
		// of an archive (tens) says whether anything is there now.
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		done := s.b.timed("stat-artifacts")
		st, err := s.b.cli.ContainerStatPath(ctx, s.c.id, client.ContainerStatPathOptions{Path: workDir})
		done()
		cancel()
		if err == nil && st.Stat.Size == s.c.emptyWork && st.Stat.Mode.IsDir() {
			return sandbox.Artifacts{}, nil
		}
	}
	return s.collect(ctx, s.spec.Limits.ArtifactFiles, s.spec.Limits.ArtifactBytes)
}

// Close ends a running Exec and removes the container with its volume, or
// wipes a reused container and gives it back to its scope's pool.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	if s.c.reused {
		return s.b.release(ctx, s.c)
	}
	return s.b.remove(ctx, s.c)
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
