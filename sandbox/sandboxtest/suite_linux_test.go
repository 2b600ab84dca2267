package sandboxtest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// This file holds a throwaway backend that exists only to test the suite:
// a plain host subprocess whose tree lives in its own cgroup v2 (so
// cgroup.kill ends double-forked and setsid'd processes too). It is not a
// product backend and must not become one; backend/local is.

const cgroupRoot = "/sys/fs/cgroup/unified/execbox-sandboxtest"

// requireCgroup skips (or, when EXECBOX_REQUIRE names "sandboxtest", fails)
// unless a cgroup v2 with cgroup.kill can be made here.
func requireCgroup(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	} else if err := os.MkdirAll(cgroupRoot, 0o755); err != nil {
		why = "making a cgroup v2: " + err.Error()
	} else if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.kill")); err != nil {
		why = "cgroup.kill missing: " + err.Error()
	}
	if why == "" {
		t.Cleanup(func() { os.Remove(cgroupRoot) }) // fails harmlessly while in use
		return
	}
	if slices.Contains(strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }), "sandboxtest") {
		t.Fatalf("the suite's test backend cannot run: %s", why)
	}
	t.Skipf("the suite's test backend cannot run: %s", why)
}

// TestSuite runs the conformance suite against the throwaway backend.
func TestSuite(t *testing.T) {
	requireCgroup(t)
	sandboxtest.Run(t, &procBackend{})
}

// TestBroken runs the suite against a deliberately broken backend; it is
// run only as a child of TestSuiteCatchesBrokenBackends.
func TestBroken(t *testing.T) {
	knob := os.Getenv("EXECBOX_SUITETEST_BROKEN")
	if knob == "" {
		t.Skip("run by TestSuiteCatchesBrokenBackends only")
	}
	requireCgroup(t)
	sandboxtest.Run(t, &procBackend{broken: knob})
}

// TestSuiteCatchesBrokenBackends proves the subtests can fail: each broken
// variant of the backend must fail the subtest written for that defect. The
// children mostly sleep, so they all run at once.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	requireCgroup(t)
	type child struct {
		knob, run string
		cmd       *exec.Cmd
		out       strings.Builder
		err       error
	}
	children := []*child{
		{knob: "pgroup_kill", run: "timeout/kills_tree"},
		{knob: "env_leak", run: "env/host_secret_hidden"},
		{knob: "env_leak", run: "env/only_allowlisted_names"},
		{knob: "shared_tmp", run: "env/home_tmpdir_private"},
		{knob: "signal_as_exit", run: "exit/signal_SIGTERM"},
		{knob: "no_truncate", run: "output/cap_over_keeps_running"},
		{knob: "no_kill_on_output", run: "output/cap_kill"},
		{knob: "follow_symlinks", run: "paths/symlink/dir"},
		{knob: "artifacts_follow", run: "symlink_artifacts/not_followed"},
		{knob: "artifacts_all", run: "files/artifacts_new_only"},
		{knob: "leak_tmp", run: "leaks/runs"},
	}
	for _, c := range children {
		pattern := "^TestBroken$"
		for _, part := range strings.Split(c.run, "/") {
			pattern += "/^" + part + "$"
		}
		c.cmd = exec.Command(os.Args[0], "-test.run", pattern, "-test.short", "-test.count=1")
		c.cmd.Env = append(os.Environ(), "EXECBOX_SUITETEST_BROKEN="+c.knob)
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range children {
		c.err = c.cmd.Wait()
	}
	for _, c := range children {
		t.Run(c.knob+"/"+c.run, func(t *testing.T) {
			var ee *exec.ExitError
			if !errors.As(c.err, &ee) {
				t.Fatalf("the suite passed a backend with defect %q (err %v):\n%s", c.knob, c.err, c.out.String())
			}
			if want := "--- FAIL: TestBroken/" + c.run; !strings.Contains(c.out.String(), want) {
				t.Fatalf("want %q in the output:\n%s", want, c.out.String())
			}
		})
	}
}

// procBackend is the throwaway backend. broken names a deliberate defect.
type procBackend struct{ broken string }

func (b *procBackend) Name() string { return "sandboxtest-proc" }

func (b *procBackend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationNone,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkHost},
		Limits:    map[string]string{"wall": "execbox timer", "output": "execbox capture"},
	}
}

func (b *procBackend) Health(context.Context) sandbox.Health {
	return sandbox.Health{Available: true, Ready: true, Reason: "test backend", CheckedAt: time.Now()}
}

func (b *procBackend) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "execbox-sandboxtest-*")
	if err != nil {
		return nil, fmt.Errorf("creating sandbox dir: %w", err)
	}
	for _, d := range []string{"work", "home", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			os.RemoveAll(root)
			return nil, fmt.Errorf("creating sandbox dir: %w", err)
		}
	}
	return &procSandbox{
		b: b, spec: spec, lim: spec.Limits.WithDefaults(sandbox.Defaults),
		root: root, id: filepath.Base(root), closed: make(chan struct{}),
	}, nil
}

type procSandbox struct {
	b    *procBackend
	spec sandbox.Spec
	lim  sandbox.Limits
	root string
	id   string

	mu          sync.Mutex
	shut        bool
	n           int                 // Execs so far, for cgroup names
	kill        func()              // ends the running Exec; nil when idle
	running     chan struct{}       // closed when the running Exec returns
	baseline    map[string][32]byte // regular files as of the last WriteFiles
	leftCgroups []string            // cgroups the pgroup_kill defect left behind

	closeOnce sync.Once
	closed    chan struct{}
}

func (s *procSandbox) ID() string   { return s.id }
func (s *procSandbox) work() string { return filepath.Join(s.root, "work") }

func (s *procSandbox) isShut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shut
}

func errClosed(id string) error {
	return sandbox.Errorf(sandbox.ErrNotFound, "sandbox_closed", "sandbox %s is closed", id)
}

func (s *procSandbox) WriteFiles(_ context.Context, files map[string][]byte) error {
	if s.isShut() {
		return errClosed(s.id)
	}
	paths := slices.Sorted(maps.Keys(files))
	for _, p := range paths {
		if err := sandbox.CheckPath(p); err != nil {
			return err
		}
	}
	if s.b.broken == "follow_symlinks" {
		for _, p := range paths {
			full := filepath.Join(s.work(), p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return fmt.Errorf("writing %q: %w", p, err)
			}
			if err := os.WriteFile(full, files[p], 0o644); err != nil {
				return fmt.Errorf("writing %q: %w", p, err)
			}
		}
	} else {
		// Check every path first so that a refused call writes nothing.
		for _, p := range paths {
			if err := s.writeAt(p, nil, false); err != nil {
				return err
			}
		}
		for _, p := range paths {
			if err := s.writeAt(p, files[p], true); err != nil {
				return err
			}
		}
	}
	snap := map[string][32]byte{}
	err := walkFD(s.work(), func(rel string, mode uint32, data []byte) {
		if mode == unix.S_IFREG {
			snap[rel] = sha256.Sum256(data)
		}
	})
	if err != nil {
		return fmt.Errorf("hashing inputs: %w", err)
	}
	s.mu.Lock()
	s.baseline = snap
	s.mu.Unlock()
	return nil
}

// writeAt walks p one component at a time with openat and O_NOFOLLOW, so no
// symlink is followed and no full path (which may pass PATH_MAX) is used.
// With write false it only checks.
func (s *procSandbox) writeAt(p string, data []byte, write bool) error {
	symlink := func() error {
		return sandbox.Errorf(sandbox.ErrInvalid, "path_symlink", "path %q passes through a symlink or a non-directory", p)
	}
	fd, err := unix.Open(s.work(), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening work dir: %w", err)
	}
	defer func() { unix.Close(fd) }()
	comps := strings.Split(p, "/")
	for _, c := range comps[:len(comps)-1] {
		next, err := unix.Openat(fd, c, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			if !write {
				return nil // nothing below can be a symlink yet
			}
			if err := unix.Mkdirat(fd, c, 0o755); err != nil {
				return fmt.Errorf("writing %q: %w", p, err)
			}
			next, err = unix.Openat(fd, c, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return symlink()
		}
		if err != nil {
			return fmt.Errorf("writing %q: %w", p, err)
		}
		unix.Close(fd)
		fd = next
	}
	last := comps[len(comps)-1]
	if !write {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, last, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return symlink()
		}
		return nil
	}
	ffd, err := unix.Openat(fd, last, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == unix.ELOOP {
		return symlink()
	}
	if err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	f := os.NewFile(uintptr(ffd), last)
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	return nil
}

// walkFD visits everything under dir without following symlinks and without
// full paths: fn gets the slash-separated relative path, the file type
// (unix.S_IF*) and, for regular files, the content. Names are visited in
// order.
func walkFD(dir string, fn func(rel string, mode uint32, data []byte)) error {
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return walkAt(fd, "", fn)
}

// walkAt walks the directory fd (which it closes).
func walkAt(fd int, prefix string, fn func(string, uint32, []byte)) error {
	d := os.NewFile(uintptr(fd), prefix)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		rel := prefix + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		switch mode := st.Mode & unix.S_IFMT; mode {
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			if err := walkAt(sub, rel+"/", fn); err != nil {
				return err
			}
		case unix.S_IFREG:
			ffd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			f := os.NewFile(uintptr(ffd), rel)
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return err
			}
			fn(rel, mode, data)
		default:
			fn(rel, mode, nil)
		}
	}
	return nil
}

func (s *procSandbox) Artifacts(context.Context) (sandbox.Artifacts, error) {
	s.mu.Lock()
	base := s.baseline
	s.mu.Unlock()
	var a sandbox.Artifacts
	var total int64
	skip := func(rel, why string) { a.Skipped = append(a.Skipped, sandbox.Skipped{Path: rel, Reason: why}) }
	err := walkFD(s.work(), func(rel string, mode uint32, data []byte) {
		switch {
		case mode == unix.S_IFLNK && s.b.broken == "artifacts_follow":
			if data, err := os.ReadFile(filepath.Join(s.work(), rel)); err == nil {
				a.Files = append(a.Files, sandbox.Artifact{Path: rel, Size: int64(len(data)), Mode: 0o644, Data: data})
			}
		case mode == unix.S_IFLNK:
			skip(rel, "symlink")
		case mode != unix.S_IFREG:
			skip(rel, "not a regular file")
		case base[rel] == sha256.Sum256(data) && s.b.broken != "artifacts_all":
			// an unchanged input
		case len(a.Files) >= s.lim.ArtifactFiles:
			skip(rel, "file count limit")
		case total+int64(len(data)) > s.lim.ArtifactBytes:
			skip(rel, "byte limit")
		default:
			total += int64(len(data))
			a.Files = append(a.Files, sandbox.Artifact{Path: rel, Size: int64(len(data)), Mode: 0o644, Data: data})
		}
	})
	if err != nil {
		return sandbox.Artifacts{}, fmt.Errorf("collecting artifacts: %w", err)
	}
	return a, nil
}

func (s *procSandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.shut || s.running != nil {
		s.mu.Unlock()
		return nil, errClosed(s.id)
	}
	s.n++
	cg := filepath.Join(cgroupRoot, fmt.Sprintf("%s-%d", s.id, s.n))
	running := make(chan struct{})
	s.running = running
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.kill = nil, nil
		s.mu.Unlock()
		close(running)
	}()

	if err := os.Mkdir(cg, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	defer func() {
		if s.b.broken == "pgroup_kill" {
			// Leave the survivors for the suite to find; Close removes them.
			s.mu.Lock()
			s.leftCgroups = append(s.leftCgroups, cg)
			s.mu.Unlock()
			return
		}
		removeCgroup(cg)
	}()
	cgfd, err := os.Open(cg)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup: %w", err)
	}
	defer cgfd.Close()

	fixed := map[string]string{"HOME": filepath.Join(s.root, "home"), "TMPDIR": filepath.Join(s.root, "tmp")}
	if s.b.broken == "shared_tmp" {
		fixed["TMPDIR"] = os.TempDir()
	}
	env := sandbox.BuildEnv(os.Environ(), s.spec.Policy, fixed, s.spec.Env, p.Env)
	if s.b.broken == "env_leak" {
		env = append(os.Environ(), env...)
	}
	wall := s.lim.Wall
	if p.Timeout > 0 && p.Timeout < wall {
		wall = p.Timeout
	}

	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	if cmd.Err != nil {
		return nil, fmt.Errorf("finding %s: %w", p.Args[0], cmd.Err)
	}
	cmd.Env, cmd.Dir = env, filepath.Join(s.work(), p.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: int(cgfd.Fd())}

	var (
		causeMu sync.Mutex
		cause   sandbox.Reason
	)
	kill := func(r sandbox.Reason) {
		causeMu.Lock()
		if cause == "" {
			cause = r
		}
		causeMu.Unlock()
		if s.b.broken == "pgroup_kill" && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return
		}
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
	}
	limit := s.lim.Output
	if s.b.broken == "no_truncate" {
		limit = 1 << 40
	}
	var overflow func()
	if s.lim.OutputLimitKill && s.b.broken != "no_kill_on_output" {
		overflow = func() { kill(sandbox.ReasonOutputLimit) }
	}
	stdout := sandbox.NewCapture(limit, p.Stdout, overflow)
	stderr := sandbox.NewCapture(limit, p.Stderr, overflow)

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if p.Stdin != nil {
		inR, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating pipe: %w", err)
		}
		defer inR.Close()
		cmd.Stdin, inW = inR, w
	}

	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", p.Args[0], err)
	}
	if r, ok := cmd.Stdin.(*os.File); ok {
		r.Close()
	}
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(stdout, outR) })
	copies.Go(func() { _, _ = io.Copy(stderr, errR) })
	if inW != nil {
		go func() { _, _ = io.Copy(inW, p.Stdin); inW.Close() }()
	}

	s.mu.Lock()
	s.kill = func() { kill(sandbox.ReasonCanceled) }
	shut := s.shut
	s.mu.Unlock()
	if shut {
		kill(sandbox.ReasonCanceled)
	}
	timer := time.AfterFunc(wall, func() { kill(sandbox.ReasonTimeout) })
	stop := context.AfterFunc(ctx, func() { kill(sandbox.ReasonCanceled) })
	werr := cmd.Wait()
	timer.Stop()
	stop()
	if s.b.broken != "pgroup_kill" {
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0) // stragglers
	}
	if inW != nil {
		inW.Close()
	}
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	outR.Close()
	errR.Close()
	<-done

	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return nil, fmt.Errorf("waiting for %s: %w", p.Args[0], werr)
	}
	st := cmd.ProcessState
	res := &sandbox.Result{
		ID: s.id, Backend: s.b.Name(), Isolation: sandbox.IsolationNone,
		Stdout: string(stdout.Bytes()), Stderr: string(stderr.Bytes()),
		StdoutTruncated: stdout.Truncated(), StderrTruncated: stderr.Truncated(),
		Usage:       sandbox.Usage{Wall: time.Since(start), CPU: st.UserTime() + st.SystemTime()},
		Enforcement: map[string]string{"wall": "execbox timer", "output": "execbox capture"},
	}
	ws := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && s.b.broken == "signal_as_exit":
		res.Reason, res.ExitCode = sandbox.ReasonExited, 128+int(ws.Signal())
	case ws.Signaled():
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSignaled, -1, unix.SignalName(ws.Signal())
	default:
		res.Reason, res.ExitCode = sandbox.ReasonExited, ws.ExitStatus()
	}
	causeMu.Lock()
	if cause != "" {
		res.Reason = cause
	}
	causeMu.Unlock()
	return res, nil
}

// removeCgroup kills what is left in cg and removes it once empty.
func removeCgroup(cg string) {
	_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
	for range 200 {
		if err := os.Remove(cg); err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *procSandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.shut = true
		kill, running := s.kill, s.running
		s.mu.Unlock()
		if kill != nil {
			kill()
		}
		if running != nil {
			<-running
		}
		s.mu.Lock()
		left := s.leftCgroups
		s.mu.Unlock()
		for _, cg := range left {
			removeCgroup(cg)
		}
		if s.b.broken != "leak_tmp" {
			os.RemoveAll(s.root)
		}
		close(s.closed)
	})
	select {
	case <-s.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ sandbox.Backend = (*procBackend)(nil)
var _ sandbox.Sandbox = (*procSandbox)(nil)
