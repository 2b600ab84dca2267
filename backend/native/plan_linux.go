package native

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/execbox/execbox/internal/nsinit"
	"github.com/execbox/execbox/sandbox"
)

// DefaultRootFS is what an interpreter needs: /usr, the merged-/usr links
// and a minimal /etc (the dynamic linker's cache, name-service switch, time
// zone, CA certificates and OpenSSL's config, the alternatives links and
// Python's site config). Every entry is a bind mount, which costs about as
// much as starting a small program, so the list stays short.
// Missing entries are skipped. /etc/passwd, group, hosts and hostname are
// generated, not taken from the host. Never /root, /home, /var, /run or a
// socket.
var DefaultRootFS = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/localtime",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/alternatives",
	"/etc/python3.*",
}

// devices are the host device nodes every sandbox gets.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// generated are the /etc files execbox writes: only root and nobody exist.
var generated = []nsinit.File{
	{Path: "/etc/passwd", Mode: 0o644, Data: "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{Path: "/etc/group", Mode: 0o644, Data: "root:x:0:\nnogroup:x:65534:\n"},
	{Path: "/etc/hosts", Mode: 0o644, Data: "127.0.0.1\tlocalhost\n127.0.1.1\t" + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{Path: "/etc/hostname", Mode: 0o644, Data: hostname + "\n"},
}

const (
	hostname = "sandbox"
	workDir  = "/work"
)

// plan is the part of every init config fixed at Create.
type plan struct {
	binds    []nsinit.Bind
	symlinks []nsinit.Symlink
	files    []nsinit.File
	mounts   []nsinit.Bind // the caller's extra mounts
	rw       []string      // Landlock: writable paths
	exec     bool          // /tmp and /work without noexec
}

// plan checks the rootfs list and extra mounts against the host.
func (b *Backend) plan(spec sandbox.Spec, e *hostEnv) (*plan, error) {
	pl := &plan{exec: spec.Policy.TmpExec || b.cfg.TmpExec}
	list, explicit := spec.Policy.RootFS, true
	if len(list) == 0 {
		list, explicit = b.cfg.RootFS, true
	}
	if len(list) == 0 {
		list, explicit = expandDefault(), false
	}
	seen := map[string]bool{}
	for _, p := range list {
		if err := b.addRoot(pl, p, explicit, seen); err != nil {
			return nil, err
		}
	}
	// Generated files go into /etc unless a bind already covers it.
	for _, f := range generated {
		if !covered(pl.binds, f.Path) {
			pl.files = append(pl.files, f)
		}
	}
	// /dev as a whole: one rule instead of one per node, and nothing can
	// be created there anyway (it is a read-only mount).
	pl.rw = []string{"/tmp", workDir, "/dev"}
	for _, m := range spec.Policy.Mounts {
		bd, err := b.checkMount(m)
		if err != nil {
			return nil, err
		}
		bd.Exec = !m.Writable || pl.exec
		pl.mounts = append(pl.mounts, bd)
		if m.Writable {
			pl.rw = append(pl.rw, bd.Target)
		}
	}
	return pl, nil
}

// expandDefault resolves the globs of DefaultRootFS.
func expandDefault() []string {
	var out []string
	for _, p := range DefaultRootFS {
		if !strings.ContainsAny(p, "*?[") {
			out = append(out, p)
			continue
		}
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

// addRoot adds one rootfs entry: a symlink is recreated, anything else is
// bind-mounted read-only at the same path. A default entry that is missing
// or unsuitable is skipped; an explicit one is an error.
func (b *Backend) addRoot(pl *plan, p string, explicit bool, seen map[string]bool) error {
	bad := func(why string) error {
		if !explicit {
			return nil
		}
		return sandbox.Errorf(sandbox.ErrInvalid, "rootfs_invalid", "rootfs path %s: %s", p, why)
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return bad("not a clean absolute path")
	}
	if seen[p] {
		return nil
	}
	seen[p] = true
	if why := b.reserved(p); why != "" {
		return bad(why)
	}
	st, err := os.Lstat(p)
	if err != nil {
		return bad("does not exist on the host")
	}
	if hasSymlinkAncestor(p) {
		return bad("a parent directory is a symlink")
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return bad(err.Error())
		}
		pl.symlinks = append(pl.symlinks, nsinit.Symlink{Path: p, Target: target})
	case st.IsDir() || st.Mode().IsRegular():
		pl.binds = append(pl.binds, nsinit.Bind{Source: p, Target: p, Exec: true})
	default:
		return bad("not a directory, regular file or symlink (sockets and devices are never mounted)")
	}
	return nil
}

// reserved says why a host path may never be exposed, or "".
func (b *Backend) reserved(p string) string {
	if p == "/" {
		return "the whole host file system is never mounted"
	}
	for _, r := range []string{"/proc", "/sys", "/dev", "/run", "/var/run"} {
		if within(p, r) {
			return r + " is never mounted from the host"
		}
	}
	// Other sandboxes' work dirs live under the work root.
	if within(p, b.workRoot) || within(b.workRoot, p) {
		return "it contains or is inside execbox's work root " + b.workRoot
	}
	return ""
}

// checkMount validates an extra mount: the source exists and no part of it
// is a symlink; the target is not one of the sandbox's own mounts.
func (b *Backend) checkMount(m sandbox.Mount) (nsinit.Bind, error) {
	bad := func(why string) error {
		return sandbox.Errorf(sandbox.ErrInvalid, "mount_invalid", "mount %s:%s: %s", m.Source, m.Target, why)
	}
	src, dst := m.Source, m.Target
	if filepath.Clean(src) != src || filepath.Clean(dst) != dst {
		return nsinit.Bind{}, bad("paths must be clean")
	}
	if why := b.reserved(src); why != "" {
		return nsinit.Bind{}, bad(why)
	}
	st, err := os.Lstat(src)
	switch {
	case err != nil:
		return nsinit.Bind{}, bad("the source does not exist on the host")
	case st.Mode()&fs.ModeSymlink != 0 || hasSymlinkAncestor(src):
		return nsinit.Bind{}, bad("the source passes through a symlink")
	case !st.IsDir() && !st.Mode().IsRegular():
		return nsinit.Bind{}, bad("the source is not a directory or regular file")
	}
	if dst == "/" || dst == "/tmp" {
		return nsinit.Bind{}, bad("the target would replace " + dst)
	}
	for _, r := range []string{"/proc", "/dev", workDir} {
		if within(dst, r) {
			return nsinit.Bind{}, bad("the target is inside " + r)
		}
	}
	return nsinit.Bind{Source: src, Target: dst, Writable: m.Writable}, nil
}

// hasSymlinkAncestor reports whether a directory above p is a symlink.
func hasSymlinkAncestor(p string) bool {
	dir := filepath.Dir(p)
	real, err := filepath.EvalSymlinks(dir)
	return err != nil || real != dir
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// covered reports whether a bind's target is p or a parent of p.
func covered(binds []nsinit.Bind, p string) bool {
	return slices.ContainsFunc(binds, func(b nsinit.Bind) bool { return within(p, b.Target) })
}
