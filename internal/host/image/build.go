package image

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
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

// entryType is what an image entry is.
type entryType int

const (
	typeDir entryType = iota
	typeFile
	typeLink
)

// entry is one path of the image.
type entry struct {
	typ    entryType
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
			b.entries[l] = &entry{typ: typeLink, target: t, mode: 0o777}
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

// addBytecode adds the compiled bytecode Debian generated for the included
// Python modules: the root is read-only, so without it every run would
// compile the standard library again.
func (b *builder) addBytecode() {
	var pys []string
	for p, e := range b.entries {
		if e.typ == typeFile && strings.HasSuffix(p, ".py") {
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
		b.entries[p] = &entry{typ: typeFile, mode: 0o644, size: int64(len(content)), data: []byte(content)}
	}
	dir := func(p string, mode fs.FileMode, uid int) {
		b.addParents(p)
		b.entries[p] = &entry{typ: typeDir, mode: mode, uid: uid}
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
