package guest

import (
	"context"
	"io"
	"maps"
	"sync/atomic"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Sandbox is a sandbox whose every call goes to the agent at the other end
// of Client, in a machine of its own (a VM, a Pod) that Kill ends. The
// backend that made the machine fills in the fields and gives it to
// NewSandbox.
type Sandbox struct {
	Client      *Client
	Spec        sandbox.Spec
	Backend     string
	Machine     string // what Kill ends, for messages: "VM", "Pod"
	Isolation   sandbox.Isolation
	Enforcement map[string]string
	// Grace is how long past a process's wall limit (or a cancel) the
	// agent has to answer before the machine is killed.
	Grace time.Duration
	// Kill ends the machine: when it returns, nothing of the sandbox runs.
	Kill func() error
	// Meter, when set, is what the machine holds now (sandbox.Meter).
	Meter func() (int64, error)
	// Lost, when set, says how a machine that broke the channel under an
	// Exec ended, as that Exec's Result (a Pod killed for memory), or nil
	// when it cannot tell.
	Lost func() *sandbox.Result

	id   string
	life sandbox.Lifecycle
	gone atomic.Bool // the machine was lost under an Exec (Lost)
}

// NewSandbox gives s its id.
func NewSandbox(id string, s *Sandbox) *Sandbox {
	s.id = id
	return s
}

func (s *Sandbox) ID() string { return s.id }

func (s *Sandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.Client.WriteFiles(ctx, files)
}

func (s *Sandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	if s.gone.Load() {
		// Its files went with it; the Result said so.
		return sandbox.Artifacts{}, nil
	}
	return s.Client.Artifacts(ctx, s.Spec.Limits.ArtifactFiles, s.Spec.Limits.ArtifactBytes)
}

// Exec runs p in the machine. A cancel asks the agent to end the process
// and report; an agent that does not answer in time is killed with its
// machine.
func (s *Sandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
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
	l := p.LimitsFor(s.Spec.Limits)
	call, stop := context.WithCancel(context.Background())
	defer stop()
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := s.Client.Exec(call, p, int(4*l.Output)+1<<20)
		done <- outcome{res, err}
	}()
	backstop := time.NewTimer(l.Wall + s.Grace)
	defer backstop.Stop()
	canceled := ctx.Done()
	for {
		select {
		case o := <-done:
			if o.err != nil && sandbox.CodeOf(o.err) == codeBroken && s.Lost != nil {
				if res := s.Lost(); res != nil {
					s.gone.Store(true)
					res.Usage.Wall = time.Since(start)
					return s.result(res), nil
				}
			}
			if o.err != nil {
				return nil, o.err
			}
			return s.result(o.res), nil
		case <-canceled:
			canceled = nil
			go func() {
				cctx, ccancel := context.WithTimeout(call, s.Grace)
				defer ccancel()
				s.Client.Cancel(cctx)
			}()
			backstop.Reset(s.Grace)
		case <-backstop.C:
			// The agent stopped answering: the machine goes, and the
			// sandbox with it.
			s.Kill()
			stop()
			<-done
			reason := sandbox.ReasonTimeout
			if canceled == nil {
				reason = sandbox.ReasonCanceled
			}
			return s.result(&sandbox.Result{Reason: reason, ExitCode: -1, Signal: "SIGKILL", Usage: sandbox.Usage{Wall: time.Since(start)},
				Message: "the agent did not answer in time; its " + s.Machine + " was killed"}), nil
		}
	}
}

// result marks res as this sandbox's: the agent's inner backend ran it.
func (s *Sandbox) result(res *sandbox.Result) *sandbox.Result {
	res.ID, res.Backend, res.Isolation = s.id, s.Backend, s.Isolation
	res.Enforcement = maps.Clone(s.Enforcement)
	return res
}

// Close kills the machine: nothing of the sandbox outlives it.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	if err := s.Kill(); err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "close_failed", "closing sandbox %s: %v", s.id, err)
	}
	return nil
}

// Memory is what the machine holds now.
func (s *Sandbox) Memory() (int64, error) {
	if s.Meter == nil {
		return 0, sandbox.Errorf(sandbox.ErrUnavailable, "no_cgroup", "sandbox %s has nothing to measure its memory with", s.id)
	}
	return s.Meter()
}

// The file calls of a session.

func (s *Sandbox) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.Client.PutFile(ctx, path, r, max)
}

func (s *Sandbox) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	ctx, end, err := s.life.BeginOp(ctx, s.id)
	if err != nil {
		return 0, err
	}
	defer end()
	return s.Client.GetFile(ctx, path, w, max)
}

func (s *Sandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.FileInfo{}, err
	}
	defer s.life.Done()
	return s.Client.Stat(ctx, path)
}

func (s *Sandbox) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return nil, false, err
	}
	defer s.life.Done()
	return s.Client.List(ctx, dir, max)
}

func (s *Sandbox) Remove(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.Client.Remove(ctx, path)
}

func (s *Sandbox) Mkdir(ctx context.Context, path string) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.Client.Mkdir(ctx, path)
}

// Interface guards.
var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ sandbox.Files   = (*Sandbox)(nil)
	_ sandbox.Meter   = (*Sandbox)(nil)
)
