package bwrap

import (
	"fmt"
	"path"
	"strconv"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/reexec"
	"github.com/execbox/execbox/sandbox"
)

// The fds bwrap is started with (ExtraFiles, from 3 on). bwrap reads and
// closes args, seccomp, info, block and the generated files; ctl and exe
// pass through to the init, which closes exe and keeps ctl from the
// program.
const (
	fdCtl     = ctlFD // control socket: config in, status out
	fdExe     = exeFD // this executable, run as the sandbox's PID 1
	fdArgs    = 5     // bwrap's arguments, NUL-separated (--args)
	fdSeccomp = 6     // the BPF program (--seccomp)
	fdInfo    = 7     // bwrap writes the sandbox's host PID (--info-fd)
	fdBlock   = 8     // bwrap waits for a byte before the init runs (--block-fd)
	fdFiles   = 9     // the generated files, one fd each (--file)
)

// bwrapArgs are bwrap's arguments for this sandbox; mounts are the host
// binds of the view's extra mounts, in order. They travel through an fd
// (--args), so the sandbox's /proc/1/cmdline shows none of them.
func (s *Sandbox) bwrapArgs(mounts []string) []string {
	v := s.view
	a := []string{"--unshare-all"}
	if s.Spec.Policy.Network == sandbox.NetworkHost {
		a = append(a, "--share-net")
	}
	fd := func(n int) string { return strconv.Itoa(n) }
	a = append(a,
		"--die-with-parent", "--new-session", "--as-pid-1",
		"--uid", fd(hostbase.UID), "--gid", fd(hostbase.GID), "--cap-drop", "ALL",
		"--hostname", hostview.Hostname,
		"--seccomp", fd(fdSeccomp), "--info-fd", fd(fdInfo), "--block-fd", fd(fdBlock),
	)
	if s.root != "" {
		// An image: its skeleton holds the mount points and generated
		// files; read-only at the end, as the host view's root.
		a = append(a, "--bind", s.root, "/")
	} else {
		a = s.hostViewArgs(a)
	}
	a = append(a, "--proc", "/proc")
	// A minimal /dev instead of --dev (which brings an unbounded /dev/shm):
	// the device nodes, the links, read-only. Terminals come from a --dev
	// hidden in it, read-only but for its devpts (a new instance: the
	// host's terminals are not in it), which /dev/pts and /dev/ptmx point
	// into (bwrap binds only host paths).
	a = append(a, "--size", "65536", "--perms", "0755", "--tmpfs", "/dev")
	// Read-only binds of the host's nodes (hostbase.OpenDevices); a bind of
	// a read-only mount stays read-only.
	for _, d := range v.Devices {
		a = append(a, "--dev-bind", path.Join(s.host.Devices, d), "/dev/"+d)
	}
	for _, l := range v.DevLinks {
		a = append(a, "--symlink", l.Target, l.Path)
	}
	a = append(a, "--dev", ptyDev, "--symlink", ptyDev+"/pts", "/dev/pts", "--symlink", ptyDev+"/pts/ptmx", "/dev/ptmx",
		"--remount-ro", ptyDev, "--remount-ro", "/dev")
	a = append(a, "--bind", s.tmpDir, hostview.Tmp, "--bind", s.Work.Path, hostview.WorkDir)
	for i, m := range v.Mounts {
		op := "--ro-bind"
		if m.Writable {
			op = "--bind"
		}
		a = append(a, op, mounts[i], m.Target)
	}
	return append(a, "--remount-ro", "/")
}

// hostViewArgs adds the host view's root to a: the host's paths, the
// merged-/usr links and the generated files.
func (s *Sandbox) hostViewArgs(a []string) []string {
	v := s.view
	// bwrap would make /etc 0700; the generated files' parents are 0755.
	made := map[string]bool{"/": true}
	for _, f := range v.Files {
		if d := path.Dir(f.Path); !made[d] {
			made[d] = true
			a = append(a, "--perms", "0755", "--dir", d)
		}
	}
	for _, b := range v.Binds {
		a = append(a, "--ro-bind", b.Source, b.Target)
	}
	for _, l := range v.Symlinks {
		a = append(a, "--symlink", l.Target, l.Path)
	}
	for i, f := range v.Files {
		a = append(a, "--perms", fmt.Sprintf("%04o", f.Mode&0o777), "--file", strconv.Itoa(fdFiles+i), f.Path)
	}
	return a
}

// ptyDev is where bwrap's own /dev is mounted, for its devpts.
const ptyDev = "/dev/.pty"

// command is bwrap's argv: the arguments come through fdArgs (bwrap takes
// the command only from its real argv), then the init, run through the fd
// execbox holds on its own executable as its registered entry point (bwrap
// sets argv[0] itself, so the entry point's marker is the one argument).
func command() []string {
	return []string{"bwrap", "--args", strconv.Itoa(fdArgs), "--", "/proc/self/fd/" + strconv.Itoa(fdExe), reexec.Arg0(initEntry)}
}
