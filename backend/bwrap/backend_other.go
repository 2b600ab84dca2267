//go:build !linux

package bwrap

import (
	"context"
	"runtime"
	"time"

	"github.com/execbox/execbox/sandbox"
)

var errNotLinux = sandbox.Errorf(sandbox.ErrUnavailable, "bwrap_unavailable", "the bwrap backend needs Linux namespaces; this is %s", runtime.GOOS)

type hostEnv struct{}

type cachedHealth struct{}

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Sessions: true}
}

func (b *Backend) Health(ctx context.Context) sandbox.Health {
	return sandbox.Health{Reason: errNotLinux.Error(), CheckedAt: time.Now()}
}

func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

var _ sandbox.Backend = (*Backend)(nil)
