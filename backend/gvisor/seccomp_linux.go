package gvisor

import (
	"encoding/json"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/seccomp"
)

// seccompPolicy is execbox's seccomp policy in OCI form, for the sentry to
// enforce inside the sandbox (--oci-seccomp), with one change for gVisor.
// It returns the policy and how many syscall names it lists.
//
// Older runsc releases (Debian 12's among them) ignore a rule's errnoRet
// and answer every SCMP_ACT_ERRNO with EPERM. Where the policy wants ENOSYS
// (clone3, so libc falls back to clone), the rule becomes SCMP_ACT_TRACE
// instead: with no tracer attached (ptrace is denied) the kernel, and
// gVisor's sentry like it, fails the call with ENOSYS.
func seccompPolicy() (*specs.LinuxSeccomp, int, error) {
	raw, err := seccomp.DockerProfile()
	if err != nil {
		return nil, 0, fmt.Errorf("building the seccomp policy: %w", err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, 0, fmt.Errorf("decoding the seccomp policy: %w", err)
	}
	for i, r := range p.Syscalls {
		if r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == uint(unix.ENOSYS) {
			p.Syscalls[i].Action, p.Syscalls[i].ErrnoRet = specs.ActTrace, nil
		}
	}
	names := map[string]bool{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			names[n] = true
		}
	}
	return &p, len(names), nil
}
