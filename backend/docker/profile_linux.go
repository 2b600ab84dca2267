package docker

import (
	"sync"

	"github.com/execbox/execbox/internal/host/seccomp"
)

// seccompProfile is execbox's seccomp policy as a Docker profile (it blocks
// io_uring, userfaultfd, namespaces and more that Docker's default allows).
var seccompProfile = sync.OnceValues(seccomp.DockerProfile)
