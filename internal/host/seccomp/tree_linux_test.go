package seccomp

import (
	"encoding/binary"
	"math"
	"math/bits"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// TestTreeMatchesLinear runs the binary-search filter and go-seccomp-bpf's
// linear one side by side in a BPF interpreter: the same decision for every
// syscall number up to well past the highest, around the x32 bit, at the
// top of the range, under foreign architectures, and for the
// argument-checked syscalls with every argument value their rules name,
// one off, and bit patterns around them.
func TestTreeMatchesLinear(t *testing.T) {
	c := mustCompile(t)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the interpreter layout assumes a little-endian host")
	}
	info, _, _ := nativeArch()
	linear, err := assemble(c.policy)
	if err != nil {
		t.Fatal(err)
	}
	tr, lin := mustVM(t, c.insts), mustVM(t, linear)
	run := func(vm *bpf.VM, in []byte) uint32 {
		t.Helper()
		r, err := vm.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(r)
	}
	var nrs []uint32
	for nr := range uint32(2048) {
		nrs = append(nrs, nr)
	}
	x32 := uint32(arch.X32.SeccompMask)
	nrs = append(nrs, x32-1, x32, x32+1, x32+1000, math.MaxUint32-1, math.MaxUint32)
	checked := 0
	for _, a := range []uint32{uint32(info.ID), uint32(arch.I386.ID), uint32(arch.X86_64.ID), uint32(arch.AARCH64.ID), 0} {
		for _, nr := range nrs {
			in := seccompData(nr, a)
			if got, want := run(tr, in), run(lin, in); got != want {
				t.Errorf("syscall %d, arch %#x: tree %#x, linear %#x", nr, a, got, want)
			}
			checked++
		}
	}
	// Argument values: the ones the rules compare with, ±1, each bit
	// alone, all bits, and the rules' values in the high word.
	values := []uint64{0, 1, math.MaxUint32, math.MaxUint64}
	for b := range 64 {
		values = append(values, 1<<b, 1<<b|0x11)
	}
	for _, sc := range c.policy.Syscalls {
		for _, a := range sc.Args {
			values = append(values, a.Value, a.Value-1, a.Value+1, a.Value<<32, ^a.Value)
		}
	}
	for _, sc := range c.policy.Syscalls {
		if len(sc.Args) == 0 {
			continue
		}
		for _, name := range sc.Names {
			nr := uint32(info.SyscallNames[name])
			for _, v := range values {
				for idx := range 3 {
					args := make([]uint64, 3)
					args[idx] = v
					in := seccompData(nr, uint32(info.ID), args...)
					if got, want := run(tr, in), run(lin, in); got != want {
						t.Errorf("%s(arg%d=%#x): tree %#x, linear %#x", name, idx, v, got, want)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d inputs decided alike; tree %d instructions, linear %d", checked, len(c.insts), len(linear))
}

// TestTreeDepth counts the instructions the filter runs before it decides a
// syscall without argument rules: a handful plus two per level of the
// search, where the linear filter tests one syscall after another.
func TestTreeDepth(t *testing.T) {
	c := mustCompile(t)
	info, _, _ := nativeArch()
	linear, err := assemble(c.policy)
	if err != nil {
		t.Fatal(err)
	}
	spans := 0
	for _, in := range c.insts {
		if _, ok := in.(bpf.RetConstant); ok {
			spans++
		}
	}
	limit := 6 + 2*bits.Len(uint(spans))
	worstTree, worstLinear := 0, 0
	for name, nr := range info.SyscallNames {
		if name == "clone" || name == "personality" || name == "socket" {
			continue
		}
		if n, ok := steps(c.insts, uint32(nr), uint32(info.ID)); !ok || n > limit {
			t.Errorf("%s: %d instructions (decided: %v), want at most %d", name, n, ok, limit)
		} else {
			worstTree = max(worstTree, n)
		}
		if n, ok := steps(linear, uint32(nr), uint32(info.ID)); ok {
			worstLinear = max(worstLinear, n)
		}
	}
	if worstLinear <= worstTree {
		t.Errorf("the tree's longest path (%d) is no shorter than the linear filter's (%d)", worstTree, worstLinear)
	}
	t.Logf("longest path: tree %d instructions, linear %d", worstTree, worstLinear)
}

// steps follows prog for syscall nr under arch as far as it only loads the
// number or the architecture, compares and jumps, and counts what it ran
// until a return; ok is false when it reached anything else (argument
// checks).
func steps(prog []bpf.Instruction, nr, arch uint32) (n int, ok bool) {
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		n++
		switch in := prog[pc].(type) {
		case bpf.LoadAbsolute:
			switch in.Off {
			case offNr:
				acc = nr
			case offArch:
				acc = arch
			default:
				return n, false
			}
		case bpf.JumpIf:
			var hit bool
			switch in.Cond {
			case bpf.JumpEqual:
				hit = acc == in.Val
			case bpf.JumpNotEqual:
				hit = acc != in.Val
			case bpf.JumpGreaterOrEqual:
				hit = acc >= in.Val
			default:
				return n, false
			}
			if hit {
				pc += int(in.SkipTrue)
			} else {
				pc += int(in.SkipFalse)
			}
		case bpf.Jump:
			pc += int(in.Skip)
		case bpf.RetConstant:
			return n, true
		default:
			return n, false
		}
	}
	return n, false
}

func mustVM(t *testing.T, prog []bpf.Instruction) *bpf.VM {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}
