//go:build !linux

package microvm

import (
	"runtime"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/sandbox"
)

func build(Config, sandbox.Settings) (sandbox.Backend, error) {
	return hostbase.NewUnsupported(Name, sandbox.IsolationVM,
		sandbox.Errorf(sandbox.ErrUnavailable, "microvm_unavailable", "the microvm backend needs QEMU on Linux; this is %s", runtime.GOOS)), nil
}
