//go:build !linux

package gvisor

import (
	"context"
	"runtime"
	"time"

	"github.com/execbox/execbox/sandbox"
)

var errNotLinux = sandbox.Errorf(sandbox.ErrUnavailable, "gvisor_unavailable", "the gvisor backend needs runsc on Linux; this is %s", runtime.GOOS)

// hostEnv is empty off Linux.
type hostEnv struct{}

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationKernel, Sessions: true}
}

func (b *Backend) Health(ctx context.Context) sandbox.Health {
	return sandbox.Health{Reason: errNotLinux.Error(), CheckedAt: time.Now()}
}

func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

var _ sandbox.Backend = (*Backend)(nil)
