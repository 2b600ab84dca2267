//go:build !linux

package docker

import (
	"errors"
	"runtime"
)

// seccompProfile is only built on Linux, where execbox's policy is defined;
// elsewhere no container is started without it.
func seccompProfile() ([]byte, error) {
	return nil, errors.New("execbox's seccomp profile is not available on " + runtime.GOOS)
}
