package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// SandboxUID and SandboxGID own /work, the sandbox's work dir.
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// Options tune Build.
type Options struct {
	// Root is the tree the files come from: "/" (the default) for this
	// host, or a debootstrap'ed directory.
	Root string
}

// Stats describe a built root filesystem.
type Stats struct {
	Files, Dirs, Symlinks int
	Bytes                 int64 // of regular files
	// Missing lists shared libraries that some included program needs but
	// that are not on the host, as "lib (needed by path)". The image is
	// built anyway; only that program (often one Python extension module)
	// will fail to load.
	Missing []string
}

// excluded are host directories whose contents never go into an image.
var excluded = []string{
	"/usr/share/doc", "/usr/share/doc-base", "/usr/share/man", "/usr/share/info",
	"/usr/share/locale", "/usr/share/lintian", "/usr/share/bug", "/usr/share/gtk-doc",
	"/usr/share/binfmts", "/usr/lib/binfmt.d", "/usr/lib/valgrind",
}

// topLinks are the top-level directories that a merged-/usr host has as
// symlinks; the image gets the same links.
var topLinks = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

type kind int

const (
	kindDir kind = iota
	kindFile
	kindLink
)

type entry struct {
	kind   kind
	mode   fs.FileMode
	mtime  time.Time
	size   int64
	src    string // host path of a file's content
	target string // a symlink's target
	uid    int
	data   []byte // content of a synthesized file
}

type builder struct {
	root    string
	entries map[string]*entry // canonical absolute path → entry
	queue   []string          // ELF files whose dependencies are not resolved yet
	scanned map[string]bool
	missing map[string]bool
	libDirs []string
}

// Build writes r's root filesystem to w as an uncompressed tar stream.
func Build(w io.Writer, r Recipe, opt Options) (Stats, error) {
	root := opt.Root
	if root == "" {
		root = "/"
	}
	b := &builder{root: root, entries: map[string]*entry{}, scanned: map[string]bool{}, missing: map[string]bool{}}
	b.libDirs = b.readLibDirs()
	for _, pkg := range r.Packages {
		paths, err := b.packageFiles(pkg)
		if err != nil {
			return Stats{}, err
		}
		for _, p := range paths {
			if err := b.add(p, false); err != nil {
				return Stats{}, fmt.Errorf("adding %s from package %s: %w", p, pkg, err)
			}
		}
	}
	for _, p := range r.Files {
		if err := b.add(p, true); err != nil {
			return Stats{}, fmt.Errorf("adding %s: %w", p, err)
		}
	}
	for _, l := range topLinks {
		if t, err := os.Readlink(b.host(l)); err == nil {
			b.entries[l] = &entry{kind: kindLink, target: t, mode: 0o777}
		}
	}
	if err := b.resolveLibraries(); err != nil {
		return Stats{}, err
	}
	b.addBytecode()
	b.synthesize()
	return b.write(w)
}

// host maps a path of the tree to the host.
func (b *builder) host(p string) string { return filepath.Join(b.root, p) }

// packageFiles lists the paths dpkg installed for pkg, or says how to get it.
func (b *builder) packageFiles(pkg string) ([]string, error) {
	info := b.host("/var/lib/dpkg/info")
	var data []byte
	var err error
	for _, name := range []string{pkg + ".list", pkg + ":" + dpkgArch() + ".list"} {
		if data, err = os.ReadFile(filepath.Join(info, name)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("package %s is not installed on this host (apt-get install %s): %w", pkg, pkg, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line == "/." || isExcluded(line) {
			continue
		}
		out = append(out, line)
	}
	return out, nil
}

// dpkgArch is dpkg's name for the running architecture.
func dpkgArch() string {
	switch a := runtime.GOARCH; a {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	default:
		return a
	}
}

func isExcluded(p string) bool {
	for _, e := range excluded {
		if p == e || strings.HasPrefix(p, e+"/") {
			return true
		}
	}
	return false
}

// resolve returns the canonical form of p inside the tree: every symlink
// followed (the last component only when followLast), never leaving root.
func (b *builder) resolve(p string, followLast bool) (string, error) {
	parts := splitPath(p)
	cur := "/"
	for hops := 0; len(parts) > 0; {
		c := parts[0]
		parts = parts[1:]
		switch c {
		case ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if len(parts) == 0 && !followLast {
			return next, nil
		}
		fi, err := os.Lstat(b.host(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("resolving %s: too many symlinks", p)
		}
		t, err := os.Readlink(b.host(next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(t) {
			cur = "/"
		}
		parts = append(splitPath(t), parts...)
	}
	return cur, nil
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// canonical is p with its directory resolved: where p really lives.
func (b *builder) canonical(p string) (string, error) {
	dir, err := b.resolve(path.Dir(path.Clean("/"+p)), true)
	if err != nil {
		return "", err
	}
	return path.Join(dir, path.Base(p)), nil
}

// add puts host path p into the image: a directory as itself (not its
// contents), a file with its content, a symlink with its target (and the
// file it ends at). A missing path is an error only when required.
func (b *builder) add(p string, required bool) error {
	cp, err := b.canonical(p)
	if err == nil && isExcluded(cp) {
		return nil
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = os.Lstat(b.host(cp))
	}
	if err != nil {
		if !required && errors.Is(err, fs.ErrNotExist) {
			return nil // listed by dpkg but removed since (a diverted or pruned file)
		}
		return err
	}
	if _, done := b.entries[cp]; done {
		return nil
	}
	b.addParents(cp)
	switch m := fi.Mode(); {
	case m.IsDir():
		b.entries[cp] = &entry{kind: kindDir, mode: m & (fs.ModePerm | fs.ModeSticky), mtime: fi.ModTime()}
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(b.host(cp))
		if err != nil {
			return err
		}
		b.entries[cp] = &entry{kind: kindLink, target: t, mode: 0o777, mtime: fi.ModTime()}
		// Take the link's next hop (and so on to the end: alternatives
		// chain links), so that no link dangles. A directory is taken as
		// itself, not its contents.
		next := t
		if !path.IsAbs(t) {
			next = path.Join(path.Dir(cp), t)
		}
		return b.add(next, false)
	case m.IsRegular():
		b.entries[cp] = &entry{kind: kindFile, mode: m & fs.ModePerm, mtime: fi.ModTime(), size: fi.Size(), src: b.host(cp)}
		if isELF(b.host(cp)) {
			b.queue = append(b.queue, cp)
		}
	default:
		// Devices, FIFOs and sockets never go into an image.
	}
	return nil
}

func (b *builder) addParents(cp string) {
	for d := path.Dir(cp); d != "/"; d = path.Dir(d) {
		if _, ok := b.entries[d]; ok {
			continue
		}
		e := &entry{kind: kindDir, mode: 0o755}
		if fi, err := os.Lstat(b.host(d)); err == nil && fi.IsDir() {
			e.mode, e.mtime = fi.Mode()&(fs.ModePerm|fs.ModeSticky), fi.ModTime()
		}
		b.entries[d] = e
	}
}

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

// addBytecode adds the compiled bytecode Debian generated for the included
// Python modules: the root is read-only, so without it every run would
// compile the standard library again.
func (b *builder) addBytecode() {
	var pys []string
	for p, e := range b.entries {
		if e.kind == kindFile && strings.HasSuffix(p, ".py") {
			pys = append(pys, p)
		}
	}
	slices.Sort(pys)
	for _, p := range pys {
		stem := strings.TrimSuffix(path.Base(p), ".py")
		matches, _ := filepath.Glob(b.host(path.Join(path.Dir(p), "__pycache__", globEscape(stem)+".*.pyc")))
		for _, m := range matches {
			rel, err := filepath.Rel(b.root, m)
			if err == nil {
				_ = b.add("/"+filepath.ToSlash(rel), false)
			}
		}
	}
}

func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// synthesize adds what no package provides: users, the temp dirs, the work
// dir and the mount points.
func (b *builder) synthesize() {
	file := func(p, content string) {
		b.addParents(p)
		b.entries[p] = &entry{kind: kindFile, mode: 0o644, size: int64(len(content)), data: []byte(content)}
	}
	dir := func(p string, mode fs.FileMode, uid int) {
		b.addParents(p)
		b.entries[p] = &entry{kind: kindDir, mode: mode, uid: uid}
	}
	file("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	file("/etc/group", "root:x:0:\nnogroup:x:65534:\n")
	file("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n")
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/home", "/etc", "/var"} {
		dir(d, 0o755, 0)
	}
	dir("/root", 0o700, 0)
	dir("/tmp", 0o777|fs.ModeSticky, 0)
	dir("/var/tmp", 0o777|fs.ModeSticky, 0)
	dir("/work", 0o755, SandboxUID)
}

// write emits the entries in path order, parents first.
func (b *builder) write(w io.Writer) (Stats, error) {
	var st Stats
	paths := make([]string, 0, len(b.entries))
	for p := range b.entries {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(x, y string) int { return slices.Compare(splitPath(x), splitPath(y)) })
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		e := b.entries[p]
		mtime := e.mtime
		if mtime.IsZero() {
			mtime = epoch
		}
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: mtime, Uid: e.uid, Gid: e.uid}
		h.Mode = int64(e.mode.Perm())
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000 // never setuid or setgid
		}
		switch e.kind {
		case kindDir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			st.Dirs++
		case kindLink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.target
			st.Symlinks++
		case kindFile:
			h.Typeflag, h.Size = tar.TypeReg, e.size
			st.Files++
			st.Bytes += e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			return st, fmt.Errorf("writing %s: %w", p, err)
		}
		if e.kind != kindFile {
			continue
		}
		if err := copyContent(tw, e); err != nil {
			return st, fmt.Errorf("writing %s: %w", p, err)
		}
	}
	for m := range b.missing {
		st.Missing = append(st.Missing, m)
	}
	slices.Sort(st.Missing)
	return st, tw.Close()
}

func copyContent(w io.Writer, e *entry) error {
	if e.data != nil {
		_, err := io.Copy(w, bytes.NewReader(e.data))
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(w, f, e.size)
	if err != nil {
		return fmt.Errorf("file changed while being read (%d of %d bytes): %w", n, e.size, err)
	}
	return nil
}
