package local

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one local sandbox: a work dir, a TMPDIR and limits.
type Sandbox struct {
	*hostbase.WorkSandbox
	base     string // holds the work dir and tmp
	tmp      string
	uid, gid int
	cred     *syscall.Credential
	user     *user.User
}

// Create makes a private work dir (and TMPDIR) and checks run_as_user.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if n := len(spec.Policy.Mounts); n > 0 {
		// It runs on the host's own file tree: a mount would be a path
		// the program does not find where it was promised.
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "mounts_unsupported", "the local backend mounts nothing (policy.mounts has %d); use an isolating backend", n)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	s := &Sandbox{uid: os.Getuid(), gid: os.Getgid()}
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
	var wd *workdir.Dir
	if err == nil {
		wd, err = workdir.New(base, s.uid, s.gid)
	}
	if err != nil {
		os.RemoveAll(base)
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	s.tmp = tmp
	s.WorkSandbox = hostbase.NewWorkSandbox(spec, wd, s.run)
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

// Close kills a running Exec and removes the work dir and TMPDIR.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.BeginClose() {
		return nil
	}
	err := s.Work.Remove()
	if rerr := os.RemoveAll(s.base); err == nil && rerr != nil {
		err = fmt.Errorf("removing sandbox dir: %w", rerr)
	}
	return err
}

// Interface guards.
var _ sandbox.Sandbox = (*Sandbox)(nil)
