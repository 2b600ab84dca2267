package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// blocked are denied whatever Docker's profile says. Names that do not
// exist on the running architecture (vm86 on x86_64) are simply absent.
var blocked = []string{
	// Namespaces and mounts: the sandbox's view of the system is fixed.
	"unshare", "setns", "clone3",
	"mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
	"open_tree", "open_tree_attr", "mount_setattr",
	// Looking into or controlling other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// Kernel modules and kexec.
	"init_module", "finit_module", "delete_module",
	"kexec_load", "kexec_file_load",
	// Kernel keyrings are not namespaced.
	"add_key", "request_key", "keyctl",
	// Large kernel attack surface a sandboxed program does not need.
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"lookup_dcookie", "fanotify_init",
	// File handles bypass path-based checks (the "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
	// Host-wide state.
	"swapon", "swapoff", "reboot", "acct",
	"settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
	"syslog", "quotactl", "quotactl_fd",
	"sethostname", "setdomainname",
	"iopl", "ioperm", "vm86", "vm86old",
}

// Syscalls whose rules are ours, whatever Docker's profile says about them.
const (
	sysClone       = "clone"
	sysClone3      = "clone3"
	sysPersonality = "personality"
)

// cloneNewFlags are all CLONE_NEW* flags. CLONE_NEWTIME (0x80) overlaps the
// exit-signal byte of clone(2), where the kernel rejects it anyway; masking
// it costs nothing.
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// safePersonas are the personality(2) arguments allowed: PER_LINUX,
// PER_LINUX32, UNAME26, PER_LINUX32|UNAME26 and the 0xffffffff query.
// Docker allows the same set.
var safePersonas = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// nativeArch is the running architecture as the BPF assembler and the OCI
// profile name it.
func nativeArch() (*arch.Info, specs.Arch, error) {
	switch runtime.GOARCH {
	case "amd64":
		return arch.X86_64, specs.ArchX86_64, nil
	case "arm64":
		return arch.AARCH64, specs.ArchAARCH64, nil
	}
	return nil, "", fmt.Errorf("seccomp policy: unsupported architecture %s", runtime.GOARCH)
}

// buildPolicy returns the policy in OCI form: one unconditional allow rule
// first, then the argument-conditional allow rules, then the errno rules.
// Every syscall name appears in exactly one kind of rule.
func buildPolicy() (*specs.LinuxSeccomp, error) {
	info, ociArch, err := nativeArch()
	if err != nil {
		return nil, err
	}
	// No capabilities: the capability-conditional entries drop out.
	noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	docker, err := moby.GetDefaultProfile(noCaps)
	if err != nil {
		return nil, fmt.Errorf("evaluating Docker's default profile: %w", err)
	}

	ours := []string{sysClone, sysClone3, sysPersonality}
	keep := func(name string) bool {
		_, known := info.SyscallNames[name]
		return known && !slices.Contains(blocked, name) && !slices.Contains(ours, name)
	}

	var allowed []string
	var conditional []specs.LinuxSyscall
	for _, sc := range docker.Syscalls {
		names := slices.DeleteFunc(slices.Clone(sc.Names), func(n string) bool { return !keep(n) })
		if len(names) == 0 {
			continue
		}
		if sc.Action != specs.ActAllow {
			// Fail closed on a profile shape this package does not know.
			return nil, fmt.Errorf("evaluating Docker's default profile: unexpected action %s for %v", sc.Action, names)
		}
		if len(sc.Args) == 0 {
			allowed = append(allowed, names...)
			continue
		}
		conditional = append(conditional, specs.LinuxSyscall{Names: names, Action: specs.ActAllow, Args: sc.Args})
	}

	conditional = append(conditional, specs.LinuxSyscall{
		Names:  []string{sysClone},
		Action: specs.ActAllow,
		// Argument 0 holds clone's flags everywhere but s390.
		Args: []specs.LinuxSeccompArg{{Index: 0, Value: cloneNewFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}},
	})
	for _, p := range safePersonas {
		conditional = append(conditional, specs.LinuxSyscall{
			Names:  []string{sysPersonality},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: 0, Value: p, Op: specs.OpEqualTo}},
		})
	}
	slices.SortFunc(allowed, func(a, b string) int { return info.SyscallNames[a] - info.SyscallNames[b] })
	allowed = slices.Compact(allowed)
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	p := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   []specs.Arch{ociArch},
		Syscalls: append(append([]specs.LinuxSyscall{{Names: allowed, Action: specs.ActAllow}}, conditional...),
			specs.LinuxSyscall{Names: []string{sysClone3}, Action: specs.ActErrno, ErrnoRet: &enosys}),
	}
	if err := checkDisjoint(p); err != nil {
		return nil, err
	}
	return p, nil
}

// checkDisjoint makes sure no syscall is both unconditionally allowed and
// governed by another rule, where the first match would silently win.
func checkDisjoint(p *specs.LinuxSeccomp) error {
	kind := map[string]string{}
	for _, sc := range p.Syscalls {
		k := string(sc.Action)
		if len(sc.Args) > 0 {
			k += "+args"
		}
		for _, n := range sc.Names {
			if prev, ok := kind[n]; ok && prev != k {
				return fmt.Errorf("seccomp policy: %s has conflicting rules %s and %s", n, prev, k)
			}
			kind[n] = k
		}
	}
	if len(kind) == 0 {
		return errors.New("seccomp policy: empty allowlist")
	}
	return nil
}

// allowedNames lists every syscall the policy lets through at least for
// some arguments.
func allowedNames(p *specs.LinuxSeccomp) []string {
	var names []string
	for _, sc := range p.Syscalls {
		if sc.Action == specs.ActAllow {
			names = append(names, sc.Names...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
