package microvm

import (
	"context"
	"io"
	"maps"
	"os"
	"time"

	"github.com/execbox/execbox/backend/microvm/guest"
	"github.com/execbox/execbox/internal/hostview"
	"github.com/execbox/execbox/sandbox"
)

// answerGrace is how long past a process's wall limit (or a cancel) the
// guest has to answer before the host kills the VM: generous, since an
// emulated guest is slow.
var answerGrace = 20 * time.Second

// vmSandbox is a sandbox in a VM of its own; every call goes to the
// agent in it.
type vmSandbox struct {
	id          string
	spec        sandbox.Spec
	vm          *machine
	enforcement map[string]string
	life        sandbox.Lifecycle
}

// Create boots a VM (or takes a warm one) of the spec's shape and makes
// the sandbox in it.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h, spec, err := b.Admit(spec)
	if err != nil {
		return nil, err
	}
	if spec.Policy.Network != sandbox.NetworkNone {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "network_unsupported", "the microvm backend has no network: a VM has no network device (network %s)", spec.Policy.Network)
	}
	for _, m := range spec.Policy.Mounts {
		if m.Writable {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "mount_invalid", "mount %s: the microvm backend shares host paths read-only", m.Source)
		}
	}
	view, err := b.view(spec)
	if err != nil {
		return nil, err
	}
	sh := shapeOf(spec.Limits, viewKey(view))
	m := b.pool.take(sh)
	if m == nil {
		if m, err = b.boot(ctx, h, h.Own.accel, sh, view); err != nil {
			return nil, err
		}
	}
	b.pool.refill(sh, view)
	files := spec.Files
	spec.Files = nil
	err = m.client.Setup(ctx, guest.Setup{Spec: spec, Files: files, HostEnv: sandbox.BuildEnv(os.Environ(), spec.Policy, nil)})
	if err != nil {
		m.kill()
		return nil, err
	}
	s := &vmSandbox{id: sandbox.NewID(), spec: spec, vm: m, enforcement: maps.Clone(h.Limits)}
	return s, nil
}

// view is the host view a sandbox of spec sees.
func (b *Backend) view(spec sandbox.Spec) (*hostview.View, error) {
	return hostview.Plan(spec, hostview.Options{Hidden: b.hidden})
}

// shapeOf is the VM a sandbox of limits l needs: RAM for the program, the
// work dir and /tmp (both tmpfs in the guest) and the guest kernel; a
// vCPU per started CPU.
func shapeOf(l sandbox.Limits, view string) shape {
	mem := (l.Memory+l.WorkSize+l.TmpSize)/sandbox.MiB + 128
	cpus := int(l.CPUs)
	if float64(cpus) < l.CPUs {
		cpus++
	}
	return shape{memMiB: mem, cpus: max(cpus, 1), view: view}
}

func (s *vmSandbox) ID() string { return s.id }

func (s *vmSandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.vm.client.WriteFiles(ctx, files)
}

func (s *vmSandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	return s.vm.client.Artifacts(ctx, s.spec.Limits.ArtifactFiles, s.spec.Limits.ArtifactBytes)
}

// Exec runs p in the guest. A cancel asks the guest to end the process
// and report; a guest that does not answer in time is killed with its VM.
func (s *vmSandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end, err := s.life.BeginExec(s.id, cancel)
	if err != nil {
		return nil, err
	}
	defer end()
	if ctx.Err() != nil {
		// Canceled before it started: nothing runs.
		return s.result(&sandbox.Result{Reason: sandbox.ReasonCanceled, ExitCode: -1, Message: "canceled before the process started"}), nil
	}
	l := p.LimitsFor(s.spec.Limits)
	call, stop := context.WithCancel(context.Background())
	defer stop()
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := s.vm.client.Exec(call, p, int(4*l.Output)+1<<20)
		done <- outcome{res, err}
	}()
	backstop := time.NewTimer(l.Wall + answerGrace)
	defer backstop.Stop()
	canceled := ctx.Done()
	for {
		select {
		case o := <-done:
			if o.err != nil {
				return nil, o.err
			}
			return s.result(o.res), nil
		case <-canceled:
			canceled = nil
			go func() {
				cctx, ccancel := context.WithTimeout(call, answerGrace)
				defer ccancel()
				s.vm.client.Cancel(cctx)
			}()
			backstop.Reset(answerGrace)
		case <-backstop.C:
			// The guest stopped answering: the VM goes, and the sandbox
			// with it.
			s.vm.kill()
			stop()
			<-done
			reason := sandbox.ReasonTimeout
			if canceled == nil {
				reason = sandbox.ReasonCanceled
			}
			return s.result(&sandbox.Result{Reason: reason, ExitCode: -1, Signal: "SIGKILL", Usage: sandbox.Usage{Wall: time.Since(start)},
				Message: "the guest did not answer in time; its VM was killed"}), nil
		}
	}
}

// result marks res as this sandbox's: the guest's inner backend ran it.
func (s *vmSandbox) result(res *sandbox.Result) *sandbox.Result {
	res.ID, res.Backend, res.Isolation = s.id, Name, sandbox.IsolationVM
	res.Enforcement = maps.Clone(s.enforcement)
	return res
}

// Close kills the VM: nothing of the sandbox outlives it.
func (s *vmSandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	if err := s.vm.kill(); err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "close_failed", "closing sandbox %s: %v", s.id, err)
	}
	return nil
}

// Memory is what the VM holds on the host (QEMU's cgroup): what a
// sandbox costs.
func (s *vmSandbox) Memory() (int64, error) {
	if s.vm.cg == nil {
		return 0, sandbox.Errorf(sandbox.ErrUnavailable, "no_cgroup", "sandbox %s has no cgroup to measure", s.id)
	}
	return s.vm.cg.Memory()
}

// The file calls of a session.

func (s *vmSandbox) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.vm.client.PutFile(ctx, path, r, max)
}

func (s *vmSandbox) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.vm.client.GetFile(ctx, path, w, max)
}

func (s *vmSandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.FileInfo{}, err
	}
	defer s.life.Done()
	return s.vm.client.Stat(ctx, path)
}

func (s *vmSandbox) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return nil, false, err
	}
	defer s.life.Done()
	return s.vm.client.List(ctx, dir, max)
}

func (s *vmSandbox) Remove(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.vm.client.Remove(ctx, path)
}

func (s *vmSandbox) Mkdir(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.vm.client.Mkdir(ctx, path)
}

// Interface guards.
var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Files   = (*vmSandbox)(nil)
	_ sandbox.Meter   = (*vmSandbox)(nil)
)
