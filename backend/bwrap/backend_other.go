//go:build !linux

package bwrap

import (
	"runtime"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/sandbox"
)

func build(Config, sandbox.Settings) (sandbox.Backend, error) {
	return hostbase.NewUnsupported(Name, sandbox.IsolationProcess,
		sandbox.Errorf(sandbox.ErrUnavailable, "bwrap_unavailable", "the bwrap backend needs Linux namespaces; this is %s", runtime.GOOS)), nil
}
