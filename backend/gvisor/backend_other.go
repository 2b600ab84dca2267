//go:build !linux

package gvisor

import (
	"runtime"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/sandbox"
)

func build(Config, sandbox.Settings) (sandbox.Backend, error) {
	return hostbase.NewUnsupported(Name, sandbox.IsolationKernel,
		sandbox.Errorf(sandbox.ErrUnavailable, "gvisor_unavailable", "the gvisor backend needs runsc on Linux; this is %s", runtime.GOOS)), nil
}
