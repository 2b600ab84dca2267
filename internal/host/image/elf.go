package image

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == elf.ELFMAG
}

// resolveLibraries adds, transitively, the interpreter and every DT_NEEDED
// library of every ELF file in the image, searched as ld.so would: the
// file's DT_RUNPATH/DT_RPATH, then the library directories.
func (b *builder) resolveLibraries() error {
	for len(b.queue) > 0 {
		p := b.queue[0]
		b.queue = b.queue[1:]
		if b.scanned[p] {
			continue
		}
		b.scanned[p] = true
		f, err := elf.Open(b.host(p))
		if err != nil {
			continue // not a loadable object after all
		}
		needed, _ := f.ImportedLibraries()
		var interp string
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				data, _ := io.ReadAll(prog.Open())
				interp = strings.TrimRight(string(data), "\x00")
			}
		}
		var rpath []string
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			vals, _ := f.DynString(tag)
			for _, v := range vals {
				for _, d := range strings.Split(v, ":") {
					rpath = append(rpath, strings.ReplaceAll(d, "$ORIGIN", path.Dir(p)))
				}
			}
		}
		class, machine := f.Class, f.Machine
		f.Close()
		if interp != "" {
			if err := b.add(interp, false); err != nil {
				return fmt.Errorf("adding the interpreter %s of %s: %w", interp, p, err)
			}
		}
		for _, lib := range needed {
			if !b.addLibrary(lib, append(rpath, b.dirsFor(machine)...), class, machine) {
				b.missing[lib+" (needed by "+p+")"] = true
			}
		}
	}
	return nil
}

// addLibrary finds lib in dirs with the right ELF class and machine and adds it.
func (b *builder) addLibrary(lib string, dirs []string, class elf.Class, machine elf.Machine) bool {
	if strings.Contains(lib, "/") {
		return b.add(lib, false) == nil && b.exists(lib)
	}
	for _, d := range dirs {
		cand := path.Join(d, lib)
		end, err := b.resolve(cand, true)
		if err != nil {
			continue
		}
		f, err := elf.Open(b.host(end))
		if err != nil {
			continue
		}
		ok := f.Class == class && f.Machine == machine
		f.Close()
		if ok {
			return b.add(cand, false) == nil
		}
	}
	return false
}

func (b *builder) exists(p string) bool {
	_, err := os.Stat(b.host(p))
	return err == nil
}

// multiarch maps an ELF machine to Debian's multiarch triplet.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu", elf.EM_386: "i386-linux-gnu",
	elf.EM_ARM: "arm-linux-gnueabihf", elf.EM_PPC64: "powerpc64le-linux-gnu", elf.EM_S390: "s390x-linux-gnu",
	elf.EM_RISCV: "riscv64-linux-gnu",
}

// dirsFor is the library search path for machine: ld.so.conf, then the
// default directories.
func (b *builder) dirsFor(machine elf.Machine) []string {
	dirs := slices.Clone(b.libDirs)
	if t, ok := multiarch[machine]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib", "/usr/lib", "/lib64", "/usr/lib64")
}

// readLibDirs reads /etc/ld.so.conf and the files it includes.
func (b *builder) readLibDirs() []string {
	var dirs []string
	var read func(file string, depth int)
	read = func(file string, depth int) {
		f, err := os.Open(b.host(file))
		if err != nil || depth > 4 {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			switch {
			case line == "":
			case strings.HasPrefix(line, "include "):
				pat := strings.TrimSpace(strings.TrimPrefix(line, "include "))
				if !path.IsAbs(pat) {
					pat = path.Join(path.Dir(file), pat)
				}
				matches, _ := filepath.Glob(b.host(pat))
				slices.Sort(matches)
				for _, m := range matches {
					rel, err := filepath.Rel(b.root, m)
					if err == nil {
						read("/"+filepath.ToSlash(rel), depth+1)
					}
				}
			case path.IsAbs(line):
				dirs = append(dirs, line)
			}
		}
	}
	read("/etc/ld.so.conf", 0)
	return dirs
}
