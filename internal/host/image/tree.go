package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// excluded are host directories whose contents never go into an image.
var excluded = []string{
	"/usr/share/doc", "/usr/share/doc-base", "/usr/share/man", "/usr/share/info",
	"/usr/share/locale", "/usr/share/lintian", "/usr/share/bug", "/usr/share/gtk-doc",
	"/usr/share/binfmts", "/usr/lib/binfmt.d", "/usr/lib/valgrind",
}

// topLinks are the top-level directories that a merged-/usr host has as
// symlinks; the image gets the same links.
var topLinks = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

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
		b.entries[cp] = &entry{typ: typeDir, mode: m & (fs.ModePerm | fs.ModeSticky), mtime: fi.ModTime()}
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(b.host(cp))
		if err != nil {
			return err
		}
		b.entries[cp] = &entry{typ: typeLink, target: t, mode: 0o777, mtime: fi.ModTime()}
		// Take the link's next hop (and so on to the end: alternatives
		// chain links), so that no link dangles. A directory is taken as
		// itself, not its contents.
		next := t
		if !path.IsAbs(t) {
			next = path.Join(path.Dir(cp), t)
		}
		return b.add(next, false)
	case m.IsRegular():
		b.entries[cp] = &entry{typ: typeFile, mode: m & fs.ModePerm, mtime: fi.ModTime(), size: fi.Size(), src: b.host(cp)}
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
		e := &entry{typ: typeDir, mode: 0o755}
		if fi, err := os.Lstat(b.host(d)); err == nil && fi.IsDir() {
			e.mode, e.mtime = fi.Mode()&(fs.ModePerm|fs.ModeSticky), fi.ModTime()
		}
		b.entries[d] = e
	}
}
