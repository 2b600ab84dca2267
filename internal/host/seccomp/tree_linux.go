package seccomp

import (
	"cmp"
	"fmt"
	"slices"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

// leaf is what the filter does for a range of syscall numbers: return a
// constant, or (cond) go on to the argument checks.
type leaf struct {
	ret  uint32
	cond bool
}

// span is the syscall numbers [lo, next span's lo) and their leaf.
type span struct {
	lo   uint32
	leaf leaf
}

// tree assembles p as a binary search over syscall numbers instead of
// go-seccomp-bpf's one comparison per syscall: about 2·log2(spans) jumps
// for any syscall instead of up to one per allowed syscall. The numbers
// are ranges (adjacent syscalls with the same action merge), each ending
// in a return. Syscalls whose rules look at arguments jump to a tail that
// go-seccomp-bpf assembles from those rules alone, so the argument
// comparisons stay the library's. A wrong architecture and x32 numbers
// jump there too: the tail checks both itself, as the linear filter does.
//
// The kernel runs the filter once per syscall number when it is installed
// (to cache the numbers it always allows) and on every syscall it cannot
// cache, so both get cheaper.
func tree(p *specs.LinuxSeccomp, info *arch.Info) ([]bpf.Instruction, error) {
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	leaves := map[uint32]leaf{}
	var conditional []specs.LinuxSyscall
	for _, sc := range p.Syscalls {
		var l leaf
		if len(sc.Args) > 0 {
			conditional = append(conditional, sc)
			l.cond = true
		} else {
			act, err := action(sc.Action, sc.ErrnoRet)
			if err != nil {
				return nil, err
			}
			l.ret = ret(act)
		}
		for _, name := range sc.Names {
			nr, ok := info.SyscallNames[name]
			if !ok {
				return nil, fmt.Errorf("syscall %s is unknown on %s", name, info.Name)
			}
			if old, seen := leaves[uint32(nr)]; seen && old != l {
				return nil, fmt.Errorf("syscall %s has rules of more than one kind", name)
			}
			leaves[uint32(nr)] = l
		}
	}
	spans := spansOf(leaves, leaf{ret: ret(def)})

	// The tail: the conditional rules alone, linear, with the default.
	tail, err := assemble(&specs.LinuxSeccomp{DefaultAction: p.DefaultAction, DefaultErrnoRet: p.DefaultErrnoRet,
		Architectures: p.Architectures, Syscalls: conditional})
	if err != nil {
		return nil, err
	}

	var prog []bpf.Instruction
	var toTail []int // indexes of jumps to the tail, fixed up at the end
	jumpTail := func() {
		toTail = append(toTail, len(prog))
		prog = append(prog, bpf.Jump{})
	}
	prog = append(prog,
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1})
	jumpTail()
	prog = append(prog, bpf.LoadAbsolute{Off: offNr, Size: 4})
	if info.ID == arch.X86_64.ID {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1})
		jumpTail()
	}
	// search emits spans[i:j]: one span is its leaf; more are a test on
	// the middle bound, the lower half after it, the upper half behind a
	// long jump (a conditional jump reaches only 255 instructions).
	var search func(i, j int)
	search = func(i, j int) {
		if j-i == 1 {
			if spans[i].leaf.cond {
				jumpTail()
			} else {
				prog = append(prog, bpf.RetConstant{Val: spans[i].leaf.ret})
			}
			return
		}
		m := (i + j) / 2
		test := len(prog)
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: spans[m].lo, SkipFalse: 1}, bpf.Jump{})
		search(i, m)
		prog[test+1] = bpf.Jump{Skip: uint32(len(prog) - (test + 2))}
		search(m, j)
	}
	search(0, len(spans))
	for _, at := range toTail {
		prog[at] = bpf.Jump{Skip: uint32(len(prog) - (at + 1))}
	}
	return append(prog, tail...), nil
}

// spansOf turns the leaves of single syscall numbers into ranges covering
// every number, def where no rule says otherwise, adjacent equal ranges
// merged.
func spansOf(leaves map[uint32]leaf, def leaf) []span {
	nrs := make([]uint32, 0, len(leaves))
	for nr := range leaves {
		nrs = append(nrs, nr)
	}
	slices.SortFunc(nrs, cmp.Compare)
	spans := []span{{0, def}}
	add := func(lo uint32, l leaf) {
		last := &spans[len(spans)-1]
		switch {
		case last.lo == lo:
			last.leaf = l
			if len(spans) > 1 && spans[len(spans)-2].leaf == l {
				spans = spans[:len(spans)-1]
			}
		case last.leaf != l:
			spans = append(spans, span{lo, l})
		}
	}
	for _, nr := range nrs {
		add(nr, leaves[nr])
		if nr < ^uint32(0) {
			if _, next := leaves[nr+1]; !next {
				add(nr+1, def)
			}
		}
	}
	return spans
}

// ret is the value a filter returns for act; go-seccomp-bpf spells EPERM as
// a bare ActionErrno.
func ret(act bpfseccomp.Action) uint32 {
	if act == bpfseccomp.ActionErrno {
		act |= bpfseccomp.Action(unix.EPERM)
	}
	return uint32(act)
}
