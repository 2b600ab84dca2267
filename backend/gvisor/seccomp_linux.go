package gvisor

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/seccomp"
)

// The sentry enforces execbox's seccomp policy itself (--oci-seccomp), and
// it reads the policy differently from libseccomp, in three ways every
// runsc release shares:
//
//   - A syscall name is resolved through runsc's own syscall table, not
//     Linux's, and a name the table does not hold is dropped with only a
//     warning in runsc's log. runsc releases before 2023-01 call
//     pselect6 "pselect", so execbox's "pselect6" was dropped and select(2)
//     fell to the default action, EPERM. Numbers the sentry does not
//     implement at all (openat2 in 2022, landlock_* today) are in no
//     table, so no name can reach them.
//   - Every SCMP_ACT_ERRNO answers EPERM: a rule's errnoRet is ignored.
//   - Architectures are ignored (the sentry runs only native code).
//
// So the policy is translated by number for the runsc in use: each Linux
// name becomes the number's name in runsc's table (`runsc help syscalls`),
// every number runsc knows gets a rule, and the default action answers
// only what no name can reach: the syscalls the sentry does not implement.
// It answers them ENOSYS (SCMP_ACT_TRACE with no tracer attached — ptrace
// is denied — fails the call with ENOSYS without running it), as gVisor
// does without a policy, so a program falls back as on an older kernel
// instead of failing with EPERM. Where the policy wants ENOSYS (clone3, so
// libc falls back to clone), the rule is SCMP_ACT_TRACE for the same
// reason. A syscall an argument rule allows only for some arguments gets a
// trailing EPERM rule for the others, as the policy's default gives them
// on the host.

// policy is execbox's seccomp policy as the sentry of one runsc enforces it.
type policy struct {
	oci *specs.LinuxSeccomp
	// rules is how many syscall names the policy lists (before
	// translation).
	rules int
	// unimplemented are the syscalls the policy allows that runsc's table
	// lacks: they answer ENOSYS, as they would without a policy.
	unimplemented []string
}

// hostSyscalls is the running architecture's syscall table as
// internal/host/seccomp names the policy's syscalls, and runsc's name for it.
func hostSyscalls() (map[string]int, string, error) {
	switch runtime.GOARCH {
	case "amd64":
		return arch.X86_64.SyscallNames, "amd64", nil
	case "arm64":
		return arch.AARCH64.SyscallNames, "arm64", nil
	}
	return nil, "", fmt.Errorf("the gvisor backend's seccomp policy: unsupported architecture %s", runtime.GOARCH)
}

// seccompPolicy translates execbox's policy for a runsc whose syscall
// table (number to name) is table.
func seccompPolicy(table map[int]string) (*policy, error) {
	raw, err := seccomp.DockerProfile()
	if err != nil {
		return nil, fmt.Errorf("building the seccomp policy: %w", err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding the seccomp policy: %w", err)
	}
	if p.DefaultAction != specs.ActErrno || (p.DefaultErrnoRet != nil && *p.DefaultErrnoRet != uint(unix.EPERM)) {
		return nil, fmt.Errorf("translating the seccomp policy: unexpected default action %s", p.DefaultAction)
	}
	numbers, _, err := hostSyscalls()
	if err != nil {
		return nil, err
	}
	out := &policy{oci: &specs.LinuxSeccomp{
		DefaultAction: specs.ActTrace,
		Architectures: p.Architectures,
		Flags:         p.Flags,
	}}
	names := map[string]bool{}
	covered := map[int]bool{}
	var partial []string // runsc names allowed only for some arguments
	for _, r := range p.Syscalls {
		var runscNames []string
		for _, n := range r.Names {
			names[n] = true
			nr, ok := numbers[n]
			if !ok {
				return nil, fmt.Errorf("translating the seccomp policy: no number for %s", n)
			}
			rn, ok := table[nr]
			if !ok {
				if r.Action == specs.ActAllow && !slices.Contains(out.unimplemented, n) {
					out.unimplemented = append(out.unimplemented, n)
				}
				continue
			}
			covered[nr] = true
			runscNames = append(runscNames, rn)
		}
		if len(runscNames) == 0 {
			continue
		}
		r.Names = runscNames
		switch {
		case r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == uint(unix.ENOSYS):
			r.Action, r.ErrnoRet = specs.ActTrace, nil
		case r.Action == specs.ActErrno && (r.ErrnoRet == nil || *r.ErrnoRet == uint(unix.EPERM)):
			r.ErrnoRet = nil
		case r.Action == specs.ActAllow && len(r.Args) > 0:
			partial = append(partial, runscNames...)
		case r.Action == specs.ActAllow:
		default:
			// runsc answers every errno with EPERM: only those two can be
			// translated faithfully.
			return nil, fmt.Errorf("translating the seccomp policy: rule %s %v has no gVisor form", r.Action, r.Names)
		}
		out.oci.Syscalls = append(out.oci.Syscalls, r)
	}
	slices.Sort(partial)
	if partial = slices.Compact(partial); len(partial) > 0 {
		out.oci.Syscalls = append(out.oci.Syscalls, specs.LinuxSyscall{Names: partial, Action: specs.ActErrno})
	}
	var denied []string
	for nr, rn := range table {
		if !covered[nr] {
			denied = append(denied, rn)
		}
	}
	if len(denied) > 0 {
		slices.Sort(denied)
		out.oci.Syscalls = append(out.oci.Syscalls, specs.LinuxSyscall{Names: denied, Action: specs.ActErrno})
	}
	slices.Sort(out.unimplemented)
	out.rules = len(names)
	return out, nil
}
