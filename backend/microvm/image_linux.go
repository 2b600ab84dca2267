package microvm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/execbox/execbox/internal/host/proc"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// guestModules are the drivers the agent needs that Debian's kernel has as
// modules: the virtio-mmio transport, the serial port and 9p. Their
// dependencies come from modules.dep.
var guestModules = []string{"virtio_mmio", "virtio_console", "9pnet_virtio", "9p"}

// image is a bootable guest: an uncompressed kernel and an initramfs with
// the agent and the modules.
type image struct {
	kernel  string // vmlinux (ELF with a PVH entry: boots without firmware)
	initrd  string
	version string // the kernel release
}

// prepareImage makes (or finds in cache) the guest image from the host's
// kernel package and the agent binary.
func prepareImage(kernel, guestBin, cache string) (*image, error) {
	if kernel == "" {
		k, err := newestKernel()
		if err != nil {
			return nil, err
		}
		kernel = k
	}
	version := strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("making the image cache: %w", err)
	}
	img := &image{version: version}
	var err error
	if img.kernel, err = cached(cache, "vmlinux", []string{kernel}, func(w io.Writer) error { return extractVmlinux(kernel, w) }); err != nil {
		return nil, fmt.Errorf("extracting the kernel from %s: %w", kernel, err)
	}
	mods, err := resolveModules(filepath.Join("/lib/modules", version), guestModules)
	if err != nil {
		return nil, err
	}
	if img.initrd, err = cached(cache, "initrd", append([]string{guestBin}, mods...), func(w io.Writer) error { return writeInitrd(w, guestBin, mods) }); err != nil {
		return nil, fmt.Errorf("making the initramfs: %w", err)
	}
	prune(cache, []string{img.kernel, img.initrd})
	return img, nil
}

// newestKernel is the newest /boot/vmlinuz-* (Debian's linux-image-amd64).
func newestKernel() (string, error) {
	ks, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(ks) == 0 {
		return "", errors.New("no guest kernel: /boot/vmlinuz-* is missing (install Debian's linux-image-amd64, or set microvm.kernel)")
	}
	sort.Slice(ks, func(i, j int) bool { return versionLess(ks[i], ks[j]) })
	return ks[len(ks)-1], nil
}

// versionLess orders kernel file names by their numbers.
func versionLess(a, b string) bool {
	na, nb := numbers(a), numbers(b)
	return slices.Compare(na, nb) < 0
}

func numbers(s string) []int {
	var out []int
	n, in := 0, false
	for _, c := range s + "." {
		if c >= '0' && c <= '9' {
			n, in = n*10+int(c-'0'), true
		} else if in {
			out, n, in = append(out, n), 0, false
		}
	}
	return out
}

// cached returns cache/<kind>-<key>, where key hashes the names, sizes and
// times of inputs, making it with build when it is missing. Files are
// written whole, then renamed: several execbox processes may race here.
func cached(cache, kind string, inputs []string, build func(io.Writer) error) (string, error) {
	h := sha256.New()
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", in, st.Size(), st.ModTime().UnixNano())
	}
	path := filepath.Join(cache, kind+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		os.Chtimes(path, now, now) // in use: kept by prune
		return path, nil
	}
	f, err := os.CreateTemp(cache, ".tmp-"+kind+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 1<<20)
	err = build(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return path, os.Rename(f.Name(), path)
}

// prune removes images of older kernels and agents not used for a week.
func prune(cache string, keep []string) {
	old, _ := filepath.Glob(filepath.Join(cache, "*-*"))
	for _, p := range old {
		st, err := os.Stat(p)
		if err == nil && !slices.Contains(keep, p) && time.Since(st.ModTime()) > 7*24*time.Hour {
			os.Remove(p)
		}
	}
}

// extractVmlinux writes the ELF kernel inside a bzImage: the payload
// after the setup code is xz (Debian) or gzip; booting the ELF directly
// skips the decompressor, seconds under emulation.
func extractVmlinux(bz string, w io.Writer) error {
	data, err := os.ReadFile(bz)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		magic  []byte
		decode func([]byte) ([]byte, error)
	}{
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, unxz},
		{[]byte{0x1f, 0x8b, 0x08}, gunzip},
	} {
		for off := 0; ; {
			i := bytes.Index(data[off:], m.magic)
			if i < 0 {
				break
			}
			off += i
			if out, err := m.decode(data[off:]); err == nil && bytes.HasPrefix(out, []byte("\x7fELF")) {
				_, err := w.Write(out)
				return err
			}
			off++
		}
	}
	return errors.New("no xz or gzip compressed ELF kernel found in it")
}

func unxz(b []byte) ([]byte, error) {
	cmd := exec.Command("xz", "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(b)
	var out bytes.Buffer
	cmd.Stdout = &out
	proc.PrivateStdio(cmd)
	if err := cmd.Run(); err != nil && out.Len() == 0 {
		return nil, fmt.Errorf("xz (Debian's xz-utils): %w", err)
	}
	return out.Bytes(), nil
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	r.Multistream(false)
	return io.ReadAll(r)
}

// resolveModules returns the module files for names and everything they
// depend on, dependencies first; built-in ones are left out.
func resolveModules(dir string, names []string) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("the guest kernel's modules (%s): %w", dir, err)
	}
	builtin, _ := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	deps := map[string][]string{} // module path → its dependencies
	byName := map[string]string{} // module name → path
	for _, line := range strings.Split(string(dep), "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[modName(mod)] = mod
	}
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[modName(l)] = true
	}
	var out []string
	seen := map[string]bool{}
	var visit func(mod string)
	visit = func(mod string) {
		if seen[mod] {
			return
		}
		seen[mod] = true
		for _, d := range deps[mod] {
			visit(d)
		}
		out = append(out, filepath.Join(dir, mod))
	}
	for _, n := range names {
		n = strings.ReplaceAll(n, "-", "_")
		if mod, ok := byName[n]; ok {
			visit(mod)
		} else if !isBuiltin[n] {
			return nil, fmt.Errorf("the guest kernel %s has no module %s", filepath.Base(dir), n)
		}
	}
	return out, nil
}

// modName is a module's name from its path: kernel/fs/9p/9p.ko.xz → 9p.
func modName(path string) string {
	n := filepath.Base(path)
	n, _, _ = strings.Cut(n, ".ko")
	return strings.ReplaceAll(n, "-", "_")
}

// writeInitrd writes the initramfs: /init (the agent), /dev/console, the
// mount points and the modules with their load order.
func writeInitrd(w io.Writer, guestBin string, mods []string) error {
	c := &cpio{w: w}
	for _, d := range []string{"dev", "proc", "sys", "newroot", "modules"} {
		c.add(d, 0o40755, 0, nil)
	}
	c.add("dev/console", 0o20600, 5<<8|1, nil)
	agent, err := os.ReadFile(guestBin)
	if err != nil {
		return fmt.Errorf("the guest agent: %w", err)
	}
	c.add("init", 0o100755, 0, agent)
	var order []string
	for _, m := range mods {
		b, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		if strings.HasSuffix(m, ".xz") {
			if b, err = unxz(b); err != nil {
				return err
			}
		}
		name := modName(m) + ".ko"
		c.add("modules/"+name, 0o100644, 0, b)
		order = append(order, name)
	}
	c.add("modules/order", 0o100644, 0, []byte(strings.Join(order, "\n")+"\n"))
	c.add("TRAILER!!!", 0, 0, nil)
	return c.err
}

// cpio writes the "newc" archive format the kernel unpacks.
type cpio struct {
	w   io.Writer
	ino uint32
	err error
}

func (c *cpio) add(name string, mode uint32, rdev uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	var hdr bytes.Buffer
	hdr.WriteString("070701")
	nlink := uint32(1)
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	for _, v := range []uint32{c.ino, mode, 0, 0, nlink, 0, uint32(len(data)), 0, 0, rdev >> 8, rdev & 0xff, uint32(len(name) + 1), 0} {
		fmt.Fprintf(&hdr, "%08x", v)
	}
	hdr.WriteString(name)
	hdr.WriteByte(0)
	pad(&hdr, hdr.Len())
	hdr.Write(data)
	pad(&hdr, len(data))
	_, c.err = c.w.Write(hdr.Bytes())
}

func pad(b *bytes.Buffer, n int) {
	for ; n%4 != 0; n++ {
		b.WriteByte(0)
	}
}
