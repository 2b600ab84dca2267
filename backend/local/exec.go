package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/reexec"
	"github.com/execbox/execbox/sandbox"
)

// run runs p through the reaper, as a plain host subprocess.
func (s *Sandbox) run(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	l := p.LimitsFor(s.Spec.Limits)
	fixed := map[string]string{"HOME": s.Work.Path, "TMPDIR": s.tmp, "PATH": hostPATH()}
	if s.user != nil {
		fixed["USER"], fixed["LOGNAME"], fixed["SHELL"] = s.user.Username, s.user.Username, "/bin/sh"
	}
	env := sandbox.BuildEnv(os.Environ(), s.Spec.Policy, fixed, s.Spec.Env, p.Env)
	dir := filepath.Join(s.Work.Path, p.Dir)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "dir_not_found", "working directory %s is not a directory in the work dir", p.Dir)
	}
	prog, code, why := lookPath(p.Args[0], env, dir)
	if code != 0 {
		// Like a shell: the program did not run; 127 or 126 says why.
		return &sandbox.Result{ID: s.ID(), Backend: Name, Isolation: sandbox.IsolationNone, Reason: sandbox.ReasonExited,
			ExitCode: code, Message: why, Enforcement: enforcement(s.user)}, nil
	}
	rlimits := map[int]uint64{
		unix.RLIMIT_DATA:   uint64(l.Memory),
		unix.RLIMIT_FSIZE:  uint64(l.FileSize),
		unix.RLIMIT_NOFILE: uint64(l.NoFile),
		unix.RLIMIT_CPU:    uint64(max(l.CPUTime/time.Second, 1)),
	}
	if s.user != nil {
		// Only a run_as_user's count is the sandbox's (pidsEnforcement).
		rlimits[unix.RLIMIT_NPROC] = uint64(l.Pids)
	}
	cfg, _ := json.Marshal(reaperConfig{Path: prog, Rlimits: rlimits})
	cmd := reexec.Command("local-reaper", append([]string{string(cfg)}, p.Args...)...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Credential: s.cred}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "pipe_failed", "creating status pipe: %w", err)
	}
	defer statusR.Close()
	cmd.ExtraFiles = []*os.File{statusW}
	out, err := proc.Run(ctx, cmd, s.Supervision(p, func() error {
		// SIGTERM asks the reaper to kill the whole tree and exit.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}))
	statusW.Close()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting local reaper: %w", err)
	}
	res := out.Result(s.ID(), Name, sandbox.IsolationNone)
	res.Usage = out.Usage()
	res.Enforcement = enforcement(s.user)
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
// When it cannot, code is sandbox.ExitNotFound (no such program) or
// sandbox.ExitNotExecutable (one that is there but cannot be executed) and
// why says so.
func lookPath(prog string, env []string, dir string) (path string, code int, why string) {
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if code, why := executable(p); code != 0 {
			return "", code, fmt.Sprintf("program %q: %s", prog, why)
		}
		return p, 0, ""
	}
	search := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, d := range filepath.SplitList(search) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		if c := filepath.Join(d, prog); isExecutable(c) {
			return c, 0, ""
		}
	}
	return "", sandbox.ExitNotFound, fmt.Sprintf("program %q not found in the sandbox's PATH", prog)
}

// executable says whether p can be executed: 0, or the exit code and why
// not (as nsinit.LookPath does for the sandboxes with a root of their own).
func executable(p string) (int, string) {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return sandbox.ExitNotFound, "not found"
	case err != nil:
		return sandbox.ExitNotExecutable, "cannot be executed: " + errors.Unwrap(err).Error()
	case st.IsDir():
		return sandbox.ExitNotExecutable, "is a directory"
	case !st.Mode().IsRegular():
		return sandbox.ExitNotExecutable, "not a regular file"
	case st.Mode().Perm()&0o111 == 0:
		return sandbox.ExitNotExecutable, "not executable (no execute permission)"
	}
	return 0, ""
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
