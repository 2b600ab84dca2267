package microvm

import (
	"context"
	"maps"
	"os"
	"time"

	"github.com/execbox/execbox/internal/host/guest"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/sandbox"
)

// answerGrace is how long past a process's wall limit (or a cancel) the
// guest has to answer before the host kills the VM: generous, since an
// emulated guest is slow.
var answerGrace = 20 * time.Second

// vmSandbox is a sandbox in a VM of its own; every call goes to the
// agent in it.
type vmSandbox struct {
	*guest.Sandbox
	vm *machine
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
	// A health probe boots its own VM and leaves the pool as it was: it
	// neither takes the warm VM a call would have found nor has one booted
	// after it (a backend only probes use holds no VM between them).
	probing := sandbox.IsProbing(ctx)
	var m *machine
	ok := false
	if !probing {
		m, ok = b.pool.Take(sh)
	}
	if !ok {
		if m, err = b.boot(ctx, h, h.Own.accel, sh, view); err != nil {
			return nil, err
		}
	}
	if !probing {
		b.pool.Refill(sh, b.bootWarm(sh, view))
	}
	files := spec.Files
	spec.Files = nil
	err = m.client.Setup(ctx, guest.Setup{Spec: spec, Files: files, HostEnv: sandbox.BuildEnv(os.Environ(), spec.Policy, nil)})
	if err != nil {
		m.kill()
		return nil, err
	}
	s := &vmSandbox{vm: m, Sandbox: guest.NewSandbox(sandbox.NewID(), &guest.Sandbox{
		Client: m.client, Spec: spec, Backend: Name, Machine: "VM", Isolation: sandbox.IsolationVM,
		Enforcement: maps.Clone(h.Limits), Grace: answerGrace, Kill: m.kill, Meter: m.memory,
	})}
	return s, nil
}

// view is the host view a sandbox of spec sees.
func (b *Backend) view(spec sandbox.Spec) (*hostview.View, error) {
	return hostview.Plan(spec, hostview.Options{Hidden: b.hidden})
}

// bootWarm boots a VM of shape sh for the warm pool.
func (b *Backend) bootWarm(sh shape, view *hostview.View) func(context.Context) (*machine, error) {
	return func(ctx context.Context) (*machine, error) {
		h := b.Host()
		if h.Err != nil {
			return nil, h.Err
		}
		return b.boot(ctx, h, h.Own.accel, sh, view)
	}
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

// Interface guards.
var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Files   = (*vmSandbox)(nil)
)
