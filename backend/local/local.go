package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/proc"
	"github.com/execbox/execbox/internal/reexec"
	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "local"

func init() {
	reexec.Entry("local-reaper", reaperMain)
	reexec.Entry("local-exec", execMain)
	sandbox.Register(sandbox.Registration{Name: Name, New: New})
}

// Backend runs sandboxes as plain host subprocesses.
type Backend struct {
	workRoot string
	defaults sandbox.Limits
}

// New returns the local backend for settings s.
func New(s sandbox.Settings) (sandbox.Backend, error) {
	return &Backend{workRoot: s.Root(), defaults: s.DefaultLimits()}, nil
}

func (b *Backend) Name() string { return Name }

// enforcement says how each limit is enforced here; the same for every run.
var enforcement = map[string]string{
	"wall":      "execbox timer (process tree killed through a subreaper)",
	"output":    "execbox capture",
	"memory":    "rlimit RLIMIT_DATA",
	"pids":      "rlimit RLIMIT_NPROC (per host user; not enforced for root)",
	"file_size": "rlimit RLIMIT_FSIZE",
	"nofile":    "rlimit RLIMIT_NOFILE",
	"cpu_time":  "rlimit RLIMIT_CPU",
	"cpus":      "not enforced (no cgroup in the local backend)",
	"tmp_size":  "not enforced (host temp dir)",
	"work_size": "not enforced (host temp dir)",
	"network":   "not enforced (host network; local has no isolation)",
}

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationNone,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkHost},
		Limits:    enforcement,
	}
}

// Health really starts /bin/true through the reaper.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{"isolation": "none"}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		h.Reason = "probe failed: " + err.Error()
	case !res.Succeeded():
		h.Reason = fmt.Sprintf("probe /bin/true ended %s (exit %d): %s", res.Reason, res.ExitCode, res.Stderr)
	default:
		h.Available, h.Ready = true, true
		h.Reason = "plain host subprocess: no isolation; used only when allow_unisolated is set"
	}
	return h
}

// Create makes a private work dir (and TMPDIR) and checks run_as_user.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	s := &Sandbox{id: sandbox.NewID(), spec: spec, uid: os.Getuid(), gid: os.Getgid()}
	if name := spec.Policy.RunAsUser; name != "" {
		if err := b.runAs(name, s); err != nil {
			return nil, err
		}
	}
	base, err := os.MkdirTemp(mkRoot(b.workRoot, s.cred != nil), "execbox-local-")
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating sandbox dir: %w", err)
	}
	s.base = base
	tmp := filepath.Join(base, "tmp")
	if err := os.Mkdir(tmp, 0o700); err == nil {
		err = os.Chown(tmp, s.uid, s.gid)
	}
	if err == nil {
		err = os.Chmod(base, 0o711)
	}
	if err == nil {
		s.wd, err = workdir.New(base, s.uid, s.gid)
	}
	if err != nil {
		os.RemoveAll(base)
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	s.tmp = tmp
	return s, nil
}

// mkRoot returns root, creating it unless run_as_user asked for an existing
// one (which runAs has checked).
func mkRoot(root string, existing bool) string {
	if !existing {
		os.MkdirAll(root, 0o711)
	}
	return root
}

// runAs resolves run_as_user and refuses every unsafe setup (seed 004).
func (b *Backend) runAs(name string, s *Sandbox) error {
	deny := func(code, format string, args ...any) error {
		return sandbox.Errorf(sandbox.ErrDenied, code, "run_as_user "+format, args...)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return deny("run_as_user_missing", "%q: no such user on this host", name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || gid == 0 {
		return deny("run_as_user_root", "%q is root; a dedicated unprivileged user is required", name)
	}
	if os.Geteuid() != 0 {
		return deny("run_as_user_not_root", "%q needs execbox to run as root to switch users", name)
	}
	st, err := os.Stat(b.workRoot)
	if err != nil || !st.IsDir() {
		return deny("work_root_missing", "%q: the work root %s does not exist; create it (owned by root, mode 0711)", name, b.workRoot)
	}
	if st.Mode().Perm()&0o002 != 0 {
		return deny("work_root_world_writable", "%q: the work root %s is world-writable; make it mode 0711", name, b.workRoot)
	}
	s.uid, s.gid = uid, gid
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	s.user = u
	return nil
}

// Sandbox is one local sandbox: a work dir, a TMPDIR and limits.
type Sandbox struct {
	id       string
	spec     sandbox.Spec
	base     string // holds the work dir and tmp
	wd       *workdir.Dir
	tmp      string
	uid, gid int
	cred     *syscall.Credential
	user     *user.User

	life sandbox.Lifecycle // operations, for Close
}

func (s *Sandbox) ID() string { return s.id }

func (s *Sandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.wd.Write(files)
}

func (s *Sandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	return s.wd.Collect(s.spec.Limits.ArtifactFiles, s.spec.Limits.ArtifactBytes)
}

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

	l := s.spec.Limits
	fixed := map[string]string{"HOME": s.wd.Path, "TMPDIR": s.tmp, "PATH": hostPATH()}
	if s.user != nil {
		fixed["USER"], fixed["LOGNAME"], fixed["SHELL"] = s.user.Username, s.user.Username, "/bin/sh"
	}
	env := sandbox.BuildEnv(os.Environ(), s.spec.Policy, fixed, s.spec.Env, p.Env)
	dir := filepath.Join(s.wd.Path, p.Dir)
	prog, err := lookPath(p.Args[0], env, dir)
	if err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(reaperConfig{Path: prog, Rlimits: map[int]uint64{
		unix.RLIMIT_DATA:   uint64(l.Memory),
		unix.RLIMIT_NPROC:  uint64(l.Pids),
		unix.RLIMIT_FSIZE:  uint64(l.FileSize),
		unix.RLIMIT_NOFILE: uint64(l.NoFile),
		unix.RLIMIT_CPU:    uint64(max(l.CPUTime/time.Second, 1)),
	}})
	cmd := reexec.Command("local-reaper", append([]string{string(cfg)}, p.Args...)...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Credential: s.cred}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "pipe_failed", "creating status pipe: %w", err)
	}
	defer statusR.Close()
	cmd.ExtraFiles = []*os.File{statusW}
	wall := p.WallLimit(l)
	out, err := proc.Run(ctx, cmd, proc.Options{
		Wall: wall, Output: l.Output, OutputLimitKill: l.OutputLimitKill,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr,
		// SIGTERM asks the reaper to kill the whole tree and exit.
		Kill: func() error {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return err
			}
			return nil
		},
	})
	statusW.Close()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting local reaper: %w", err)
	}
	res := out.Result(s.id, Name, sandbox.IsolationNone)
	res.Usage = out.Usage()
	res.Enforcement = enforcement
	var st status
	raw, _ := io.ReadAll(io.LimitReader(statusR, 1024))
	if json.Unmarshal(raw, &st) != nil {
		// The reaper died before the program ended (killed from outside,
		// or it could not start the program).
		if out.Reason == sandbox.ReasonExited || out.Reason == sandbox.ReasonSignaled {
			res.Reason = sandbox.ReasonSandboxError
			res.Message = "the local reaper ended without a status: " + strings.TrimSpace(res.Stderr)
		}
		return res, nil
	}
	res.ExitCode, res.Signal = st.Exit, ""
	if st.Signal != 0 {
		res.Signal = unix.SignalName(syscall.Signal(st.Signal))
	}
	if res.Reason == sandbox.ReasonExited || res.Reason == sandbox.ReasonSignaled {
		res.Reason = sandbox.ReasonOf(syscall.Signal(st.Signal))
	}
	return res, nil
}

// lookPath finds prog the way a shell would with the sandbox's own PATH.
func lookPath(prog string, env []string, dir string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(dir, prog)
		}
		if isExecutable(prog) {
			return prog, nil
		}
		return "", sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "program %q not found or not executable", prog)
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		if c := filepath.Join(d, prog); isExecutable(c) {
			return c, nil
		}
	}
	return "", sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "program %q not found in the sandbox's PATH", prog)
}

// hostPATH is the host's PATH without relative entries and without entries
// in execbox's own home directory: an operator's personal toolchains and
// shims (pyenv, cargo, …) are not the sandbox's business, and they would
// drag their own environment in. A request may still set PATH itself.
func hostPATH() string {
	home, _ := os.UserHomeDir()
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(d) || (home != "" && home != "/" && (d == home || strings.HasPrefix(d, home+"/"))) {
			continue
		}
		keep = append(keep, d)
	}
	if len(keep) == 0 {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return strings.Join(keep, ":")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Close kills a running Exec and removes the work dir and TMPDIR.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	err := s.wd.Remove()
	if rerr := os.RemoveAll(s.base); err == nil && rerr != nil {
		err = fmt.Errorf("removing sandbox dir: %w", rerr)
	}
	return err
}

// Interface guards.
var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Sandbox = (*Sandbox)(nil)
)
