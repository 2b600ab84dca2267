package hostview

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/execbox/execbox/sandbox"
)

// DefaultRootFS is what an interpreter needs: /usr, the merged-/usr links
// and a minimal /etc (the dynamic linker's cache, name-service switch, time
// zone, CA certificates and OpenSSL's config, the alternatives links and
// Python's site config). Every entry is a bind mount, which costs about as
// much as starting a small program, so the list stays short. Missing
// entries are skipped; globs are expanded. /etc/passwd, group, hosts and
// hostname are generated, not taken from the host. Never /root, /home,
// /var, /run or a socket.
var DefaultRootFS = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/localtime",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/alternatives",
	"/etc/python3.*",
}

// Fixed facts of every sandbox's view.
const (
	// Hostname is the sandbox's host name (UTS namespace and /etc/hosts).
	Hostname = "sandbox"
	// WorkDir is where the sandbox's work dir is mounted, writable.
	WorkDir = "/work"
	// Tmp is the sandbox's private tmpfs.
	Tmp = "/tmp"
)

// Devices are the host /dev nodes every sandbox gets, by name.
var Devices = []string{"null", "zero", "full", "random", "urandom"}

// DevLinks are the symlinks of a sandbox's /dev. /dev/shm points into
// /tmp, so POSIX shared memory shares /tmp's size limit instead of having
// an unbounded budget of its own.
var DevLinks = []Symlink{
	{Path: "/dev/fd", Target: "/proc/self/fd"},
	{Path: "/dev/stdin", Target: "/proc/self/fd/0"},
	{Path: "/dev/stdout", Target: "/proc/self/fd/1"},
	{Path: "/dev/stderr", Target: "/proc/self/fd/2"},
	{Path: "/dev/shm", Target: "/tmp"},
}

// Generated are the /etc files execbox writes: only root and nobody exist.
var Generated = []File{
	{Path: "/etc/passwd", Mode: 0o644, Data: "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{Path: "/etc/group", Mode: 0o644, Data: "root:x:0:\nnogroup:x:65534:\n"},
	{Path: "/etc/hosts", Mode: 0o644, Data: "127.0.0.1\tlocalhost\n127.0.1.1\t" + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{Path: "/etc/hostname", Mode: 0o644, Data: Hostname + "\n"},
}

// Bind is a host path made visible in the sandbox.
type Bind struct {
	Source   string // absolute host path
	Target   string // absolute path inside the sandbox
	Writable bool   // read-only unless set
	Exec     bool   // noexec unless set
}

// Symlink is a symbolic link created in the sandbox.
type Symlink struct {
	Path   string
	Target string
}

// File is a generated regular file in the sandbox.
type File struct {
	Path string
	Data string
	Mode uint32
}

// Options are a backend's settings for Plan.
type Options struct {
	// RootFS is the backend's configured root list, used when the spec's
	// Policy.RootFS is empty; both empty means DefaultRootFS.
	RootFS []string
	// Hidden are host directories never exposed, nor anything inside or
	// containing them (execbox's work roots).
	Hidden []string
	// TmpExec drops noexec from /tmp, the work dir and writable mounts for
	// every sandbox (Policy.TmpExec does it for one).
	TmpExec bool
}

// View is a sandbox's host view, checked against the host.
type View struct {
	// Image is an unpacked image (Spec.Root) that is the root instead of
	// host paths: read-only, with mount points and generated files made
	// above it, never in it. Binds and Symlinks are empty then.
	Image string
	// Binds are the root's host paths, read-only and exec, at the same path.
	Binds []Bind
	// Symlinks are host symlinks of the root list, recreated (merged /usr).
	Symlinks []Symlink
	// Files are the Generated files no bind covers.
	Files []File
	// Devices are the host /dev nodes to expose (Devices), DevLinks the
	// symlinks beside them.
	Devices  []string
	DevLinks []Symlink
	// Mounts are the caller's extra mounts (Policy.Mounts), validated, to
	// be mounted after /tmp and the work dir (they may sit below /tmp).
	Mounts []Bind
	// Writable are the paths the program may write (a Landlock list):
	// /tmp, the work dir, /dev and the writable mounts.
	Writable []string
	// Exec: /tmp and the work dir are mounted without noexec.
	Exec bool
}

// Plan checks spec's root list and extra mounts against the host and
// returns the sandbox's view. Errors are sandbox.ErrInvalid with the code
// "rootfs_invalid" or "mount_invalid".
func Plan(spec sandbox.Spec, o Options) (*View, error) {
	v := &View{
		Exec:     spec.Policy.TmpExec || o.TmpExec,
		Devices:  slices.Clone(Devices),
		DevLinks: slices.Clone(DevLinks),
	}
	list, explicit := spec.Policy.RootFS, true
	switch {
	case spec.Root != nil:
		if len(spec.Policy.RootFS) > 0 {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "rootfs_invalid", "rootfs lists host paths, and the image %s is the root: give one or the other", spec.Root.Ref)
		}
		if !filepath.IsAbs(spec.Root.Dir) || filepath.Clean(spec.Root.Dir) != spec.Root.Dir {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "rootfs_invalid", "the image %s has no unpacked root", spec.Root.Ref)
		}
		v.Image, list = spec.Root.Dir, nil
	case len(list) == 0 && len(o.RootFS) > 0:
		list = o.RootFS
	case len(list) == 0:
		list, explicit = ExpandDefault(), false
	}
	seen := map[string]bool{}
	for _, p := range list {
		if err := v.addRoot(p, explicit, seen, o.Hidden); err != nil {
			return nil, err
		}
	}
	// Generated files go into /etc unless a bind already covers it; an
	// image keeps its own users and groups.
	for _, f := range Generated {
		if covered(v.Binds, f.Path) || v.Image != "" && (f.Path == "/etc/passwd" || f.Path == "/etc/group") && regular(filepath.Join(v.Image, f.Path)) {
			continue
		}
		v.Files = append(v.Files, f)
	}
	// /dev as a whole: one rule instead of one per node, and nothing can
	// be created there anyway (it is read-only).
	v.Writable = []string{Tmp, WorkDir, "/dev"}
	for _, m := range spec.Policy.Mounts {
		bd, err := checkMount(m, o.Hidden)
		if err != nil {
			return nil, err
		}
		bd.Exec = !m.Writable || v.Exec
		v.Mounts = append(v.Mounts, bd)
		if m.Writable {
			v.Writable = append(v.Writable, bd.Target)
		}
	}
	return v, nil
}

// ExpandDefault returns DefaultRootFS with its globs resolved on this host.
func ExpandDefault() []string {
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

// addRoot adds one root entry: a symlink is recreated, anything else is
// bind-mounted read-only at the same path. A default entry that is missing
// or unsuitable is skipped; an explicit one is an error.
func (v *View) addRoot(p string, explicit bool, seen map[string]bool, hidden []string) error {
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
	if why := reserved(p, hidden); why != "" {
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
		v.Symlinks = append(v.Symlinks, Symlink{Path: p, Target: target})
	case st.IsDir() || st.Mode().IsRegular():
		v.Binds = append(v.Binds, Bind{Source: p, Target: p, Exec: true})
	default:
		return bad("not a directory, regular file or symlink (sockets and devices are never mounted)")
	}
	return nil
}

// reserved says why a host path may never be exposed, or "".
func reserved(p string, hidden []string) string {
	if p == "/" {
		return "the whole host file system is never mounted"
	}
	for _, r := range []string{"/proc", "/sys", "/dev", "/run", "/var/run"} {
		if Within(p, r) {
			return r + " is never mounted from the host"
		}
	}
	// Other sandboxes' work dirs live under the work roots.
	for _, h := range hidden {
		if Within(p, h) || Within(h, p) {
			return "it contains or is inside execbox's work root " + h
		}
	}
	return ""
}

// CheckMount validates an extra mount for a backend that plans no host
// view of its own (docker): the checks Plan makes of Policy.Mounts, with
// hidden the paths no mount may contain or sit inside.
func CheckMount(m sandbox.Mount, hidden []string) (Bind, error) { return checkMount(m, hidden) }

// checkMount validates an extra mount: the source exists and no part of it
// is a symlink; the target is not one of the sandbox's own mounts.
func checkMount(m sandbox.Mount, hidden []string) (Bind, error) {
	bad := func(why string) error {
		return sandbox.Errorf(sandbox.ErrInvalid, "mount_invalid", "mount %s:%s: %s", m.Source, m.Target, why)
	}
	src, dst := m.Source, m.Target
	if filepath.Clean(src) != src || filepath.Clean(dst) != dst {
		return Bind{}, bad("paths must be clean")
	}
	if why := reserved(src, hidden); why != "" {
		return Bind{}, bad(why)
	}
	st, err := os.Lstat(src)
	switch {
	case err != nil:
		return Bind{}, bad("the source does not exist on the host")
	case st.Mode()&fs.ModeSymlink != 0 || hasSymlinkAncestor(src):
		return Bind{}, bad("the source passes through a symlink")
	case !st.IsDir() && !st.Mode().IsRegular():
		return Bind{}, bad("the source is not a directory or regular file")
	}
	if dst == "/" || dst == Tmp {
		return Bind{}, bad("the target would replace " + dst)
	}
	for _, r := range []string{"/proc", "/dev", WorkDir} {
		if Within(dst, r) {
			return Bind{}, bad("the target is inside " + r)
		}
	}
	return Bind{Source: src, Target: dst, Writable: m.Writable}, nil
}

// regular reports whether p is a regular file (not through a symlink).
func regular(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode().IsRegular()
}

// hasSymlinkAncestor reports whether a directory above p is a symlink.
func hasSymlinkAncestor(p string) bool {
	dir := filepath.Dir(p)
	real, err := filepath.EvalSymlinks(dir)
	return err != nil || real != dir
}

// Within reports whether p is dir or below it.
func Within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// covered reports whether a bind's target is p or a parent of p.
func covered(binds []Bind, p string) bool {
	return slices.ContainsFunc(binds, func(b Bind) bool { return Within(p, b.Target) })
}
