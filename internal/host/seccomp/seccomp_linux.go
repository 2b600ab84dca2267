package seccomp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// maxInstructions is the kernel's BPF_MAXINSNS.
const maxInstructions = 4096

// compiled is the policy in every form, built once.
type compiled struct {
	policy *specs.LinuxSeccomp
	insts  []bpf.Instruction
	prog   []unix.SockFilter
}

var compile = sync.OnceValues(func() (*compiled, error) {
	p, err := buildPolicy()
	if err != nil {
		return nil, err
	}
	info, _, err := nativeArch()
	if err != nil {
		return nil, err
	}
	insts, err := tree(p, info)
	if err != nil {
		return nil, fmt.Errorf("assembling seccomp policy: %w", err)
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("assembling seccomp policy: %w", err)
	}
	if len(raw) > maxInstructions {
		return nil, fmt.Errorf("assembling seccomp policy: %d instructions, kernel limit %d", len(raw), maxInstructions)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return &compiled{policy: p, insts: insts, prog: prog}, nil
})

// Program returns the default policy compiled to classic BPF for the running
// architecture, assembled once and cached. The caller owns the returned slice.
func Program() ([]unix.SockFilter, error) {
	c, err := compile()
	if err != nil {
		return nil, err
	}
	return slices.Clone(c.prog), nil
}

// Bytes returns Program as the raw struct sock_filter array (8 bytes each,
// native byte order, which is little-endian on every supported architecture)
// that bwrap --seccomp reads from its fd.
func Bytes() ([]byte, error) {
	prog, err := Program()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		b = binary.NativeEndian.AppendUint16(b, f.Code)
		b = append(b, f.Jt, f.Jf)
		b = binary.NativeEndian.AppendUint32(b, f.K)
	}
	return b, nil
}

// Install sets no_new_privs and installs Program on every thread of the
// calling process (SECCOMP_FILTER_FLAG_TSYNC). An init process calls it
// right before execve; the filter stays for the rest of the process tree's
// life.
func Install() error {
	prog, err := Program()
	if err != nil {
		return err
	}
	// no_new_privs must be set on the thread that installs the filter;
	// TSYNC then carries both to the other threads.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("installing seccomp filter: %w", errno)
	}
	if r != 0 {
		// With TSYNC a positive return names a thread that could not be synced.
		return fmt.Errorf("installing seccomp filter: thread %d could not be synchronized", r)
	}
	return nil
}

// DockerProfile returns the same policy as a Docker/OCI seccomp JSON profile
// (docker run --security-opt seccomp=FILE, or linux.seccomp of an OCI spec).
func DockerProfile() ([]byte, error) {
	c, err := compile()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(c.policy, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding seccomp profile: %w", err)
	}
	return b, nil
}

// Blocked lists the syscalls the policy denies on purpose although a general
// allowlist might have them. clone3 is among them (it fails with ENOSYS);
// clone and personality are allowed only with safe arguments (see the
// package documentation) and are not listed.
func Blocked() []string {
	b := slices.Clone(blocked)
	slices.Sort(b)
	return b
}

// assemble turns the OCI form into BPF with go-seccomp-bpf: one group per
// rule kind, in the policy's order, tested one after the other (tree uses
// it for the argument-conditional rules).
func assemble(p *specs.LinuxSeccomp) ([]bpf.Instruction, error) {
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	pol := bpfseccomp.Policy{DefaultAction: def}
	// All argument-conditional allows share one group, where the assembler
	// ORs the condition sets of one syscall.
	conditional := -1 // index of that group in pol.Syscalls
	for _, sc := range p.Syscalls {
		act, err := action(sc.Action, sc.ErrnoRet)
		if err != nil {
			return nil, err
		}
		if len(sc.Args) == 0 {
			pol.Syscalls = append(pol.Syscalls, bpfseccomp.SyscallGroup{Names: sc.Names, Action: act})
			continue
		}
		if act != bpfseccomp.ActionAllow {
			return nil, fmt.Errorf("conditional rule for %v: only allow is supported", sc.Names)
		}
		conds := make(bpfseccomp.ArgumentConditions, 0, len(sc.Args))
		for _, a := range sc.Args {
			c, err := condition(a)
			if err != nil {
				return nil, fmt.Errorf("rule for %v: %w", sc.Names, err)
			}
			conds = append(conds, c)
		}
		if conditional < 0 {
			conditional = len(pol.Syscalls)
			pol.Syscalls = append(pol.Syscalls, bpfseccomp.SyscallGroup{Action: bpfseccomp.ActionAllow})
		}
		g := &pol.Syscalls[conditional]
		for _, n := range sc.Names {
			g.NamesWithCondtions = append(g.NamesWithCondtions, bpfseccomp.NameWithConditions{Name: n, Conditions: conds})
		}
	}
	return pol.Assemble()
}

func action(a specs.LinuxSeccompAction, errno *uint) (bpfseccomp.Action, error) {
	switch a {
	case specs.ActAllow:
		return bpfseccomp.ActionAllow, nil
	case specs.ActErrno:
		e := uint(unix.EPERM)
		if errno != nil {
			e = *errno
		}
		if e == uint(unix.EPERM) {
			// The assembler's own spelling of EPERM; the only one it
			// accepts as a default action.
			return bpfseccomp.ActionErrno, nil
		}
		return bpfseccomp.ActionErrno | bpfseccomp.Action(e&0xffff), nil
	}
	return 0, fmt.Errorf("unsupported seccomp action %s", a)
}

func condition(a specs.LinuxSeccompArg) (bpfseccomp.Condition, error) {
	c := bpfseccomp.Condition{Argument: uint32(a.Index), Value: a.Value}
	switch a.Op {
	case specs.OpEqualTo:
		c.Operation = bpfseccomp.Equal
	case specs.OpNotEqual:
		c.Operation = bpfseccomp.NotEqual
	case specs.OpLessThan:
		c.Operation = bpfseccomp.LessThan
	case specs.OpLessEqual:
		c.Operation = bpfseccomp.LessOrEqual
	case specs.OpGreaterThan:
		c.Operation = bpfseccomp.GreaterThan
	case specs.OpGreaterEqual:
		c.Operation = bpfseccomp.GreaterOrEqual
	case specs.OpMaskedEqual:
		// arg & mask == 0 is "none of these bits set"; other masked
		// comparisons have no single go-seccomp-bpf operation.
		if a.ValueTwo != 0 {
			return c, fmt.Errorf("unsupported masked comparison (value two %#x)", a.ValueTwo)
		}
		c.Operation = bpfseccomp.BitsNotSet
	default:
		return c, fmt.Errorf("unsupported comparison %s", a.Op)
	}
	return c, nil
}
