package nsinit

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// EntryName is the reexec entry point the init runs as.
const EntryName = "nsinit"

// protocol is the version of the control protocol; the init announces it
// in its first byte, so a stale execbox-init next to a newer execbox is
// refused with a clear error instead of misreading the config.
const protocol = 4

// goByte is the parent's go-ahead: the init sits in its cgroup.
const goByte = 'G'

// maxConfig bounds the config message (argv and env are its big parts;
// execve itself allows a few MiB at most).
const maxConfig = 16 << 20

// Config is everything the init does, decided by the backend. The init
// itself holds no policy: it mounts what Binds list, writes what Files
// list and runs Args. A zero field means "none" / "off".
type Config struct {
	// Args is the program: Args[0] is looked up in PATH (from Env) when it
	// has no slash, after the new root is in place.
	Args []string `json:"args"`
	// Env is the program's complete environment.
	Env []string `json:"env"`
	// Dir is the program's working directory inside the sandbox.
	Dir string `json:"dir"`
	// UID and GID are the program's ids inside the sandbox.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// NoSetgroups: setgroups is denied in this user namespace (rootless);
	// the program keeps the (empty) group list it has.
	NoSetgroups bool `json:"no_setgroups,omitempty"`
	// Hostname is set in the new UTS namespace.
	Hostname string `json:"hostname"`

	// Root is a host directory the new root (a tmpfs) is mounted on. The
	// mount lives only in the init's mount namespace.
	Root string `json:"root"`
	// RootSize bounds the root tmpfs (it holds only mount points and the
	// generated files).
	RootSize int64 `json:"root_size"`
	// Image is an unpacked image (a host directory) that the new root
	// shows instead of host paths: the lower layer of an overlay whose
	// upper layer is the root tmpfs, so mount points and Files are made in
	// the tmpfs and the image is never written.
	Image string `json:"image,omitempty"`
	// Binds are host paths bind-mounted into the new root, in order.
	Binds []Bind `json:"binds"`
	// Files are generated files (passwd, group, hosts) written into the
	// root before it becomes read-only.
	Files []File `json:"files,omitempty"`
	// Symlinks are created in the root (the merged-/usr links).
	Symlinks []Symlink `json:"symlinks,omitempty"`
	// Devices are names of host /dev nodes bind-mounted into a fresh /dev.
	Devices []string `json:"devices"`
	// DevLinks are symlinks created in that /dev (fd, stdin, shm → /tmp).
	DevLinks []Symlink `json:"dev_links,omitempty"`
	// Tmp is the /tmp tmpfs.
	Tmp Tmp `json:"tmp"`
	// Mounts are mounted after /tmp and the binds: the work dir and the
	// caller's extra mounts, which may sit below /tmp.
	Mounts []Bind `json:"mounts,omitempty"`

	// Loopback brings lo up in the (new, empty) network namespace.
	Loopback bool `json:"loopback,omitempty"`
	// NewCgroupNS unshares the cgroup namespace once the init sits in its
	// cgroup (v1, where the parent moves it after clone), so the program
	// sees its own cgroup as "/".
	NewCgroupNS bool `json:"new_cgroup_ns,omitempty"`
	// Rlimits are set on the program (soft, hard).
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// Landlock lists the paths the program may write (the rest of the
	// file system is read-only to it); nil means no Landlock.
	Landlock *Landlock `json:"landlock,omitempty"`
	// Seccomp is the raw struct sock_filter array to install on the
	// program; empty means none.
	Seccomp []byte `json:"seccomp,omitempty"`
}

// Bind is one host path made visible in the sandbox.
type Bind struct {
	Source   string `json:"source"`             // absolute host path
	Target   string `json:"target"`             // absolute path inside the sandbox
	Writable bool   `json:"writable,omitempty"` // read-only unless set
	Exec     bool   `json:"exec,omitempty"`     // noexec unless set
	Dev      bool   `json:"dev,omitempty"`      // nodev unless set
	Optional bool   `json:"optional,omitempty"` // a missing source is skipped, not an error
}

// File is a generated regular file in the root.
type File struct {
	Path string `json:"path"`
	Data string `json:"data"`
	Mode uint32 `json:"mode"`
}

// Symlink is a symbolic link in the root.
type Symlink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// Tmp is the /tmp tmpfs.
type Tmp struct {
	Size   int64 `json:"size"`
	Inodes int64 `json:"inodes"`
	Exec   bool  `json:"exec,omitempty"`
}

// Rlimit is one resource limit.
type Rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// Landlock says what the program may write.
type Landlock struct {
	RW []string `json:"rw"` // directories (and device files) writable by the program
}

// Status is the init's one report: how the program ended, or why it could
// not run.
type Status struct {
	// Error is set when the sandbox could not be set up or the program not
	// started; Code classifies it (CodeNotFound, CodeNotExecutable,
	// CodeDirNotFound, CodeSetup, CodeStartFailed).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// ExitCode is the program's exit status; -1 when a signal ended it.
	ExitCode int `json:"exit_code"`
	// Signal is the signal that ended the program, 0 if none.
	Signal int `json:"signal,omitempty"`
	// Landlock describes what Landlock enforced (ABI, best effort), or why not.
	Landlock string `json:"landlock,omitempty"`
}

// Status codes.
const (
	CodeSetup         = "setup_failed"
	CodeNotFound      = "program_not_found"      // no such program: exit 127
	CodeNotExecutable = "program_not_executable" // found, cannot be executed: exit 126
	CodeDirNotFound   = "dir_not_found"
	CodeStartFailed   = "start_failed"
)

// Validate checks the invariants the init relies on.
func (c *Config) Validate() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return errors.New("no program")
	}
	if !isCleanAbs(c.Root) || c.Root == "/" {
		return fmt.Errorf("root %q is not a clean absolute path", c.Root)
	}
	if !isCleanAbs(c.Dir) {
		return fmt.Errorf("dir %q is not a clean absolute path", c.Dir)
	}
	// An overlay's options are a comma-separated list, and lowerdir a
	// colon-separated one.
	if c.Image != "" && (!isCleanAbs(c.Image) || c.Image == "/" || strings.ContainsAny(c.Image, ",:\\")) {
		return fmt.Errorf("image %q is not a clean absolute path without , : or \\", c.Image)
	}
	for _, b := range append(append([]Bind(nil), c.Binds...), c.Mounts...) {
		if !isCleanAbs(b.Source) || !isCleanAbs(b.Target) || b.Target == "/" {
			return fmt.Errorf("bind %q→%q: both must be clean absolute paths, not /", b.Source, b.Target)
		}
	}
	for _, f := range c.Files {
		if !isCleanAbs(f.Path) || f.Path == "/" {
			return fmt.Errorf("file %q is not a clean absolute path", f.Path)
		}
	}
	for _, l := range c.Symlinks {
		if !isCleanAbs(l.Path) || l.Path == "/" {
			return fmt.Errorf("symlink %q is not a clean absolute path", l.Path)
		}
	}
	for _, l := range c.DevLinks {
		if !isCleanAbs(l.Path) || path.Dir(l.Path) != "/dev" {
			return fmt.Errorf("dev link %q is not directly in /dev", l.Path)
		}
	}
	for _, d := range c.Devices {
		if d == "" || strings.Contains(d, "/") || d == "." || d == ".." {
			return fmt.Errorf("device %q is not a plain name", d)
		}
	}
	if c.Tmp.Size <= 0 {
		return errors.New("no /tmp size")
	}
	return nil
}

func isCleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}
