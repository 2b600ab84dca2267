package sandbox

import (
	"io"
	"time"
)

// Spec says what sandbox to create. Its zero value is the strict one.
type Spec struct {
	// Limits bound what the program may use; zero fields take the defaults.
	Limits Limits `json:"limits"`
	// Policy relaxes isolation; its zero value relaxes nothing.
	Policy Policy `json:"policy"`
	// Files are written into the work dir before anything runs: relative
	// path → content. Paths are checked by CheckPath.
	Files map[string][]byte `json:"-"`
	// Env sets variables for every process of the sandbox, on top of the
	// allowlisted ones (see BuildEnv).
	Env map[string]string `json:"env,omitempty"`
	// Image names the root filesystem: an image of execbox's store
	// (resolved by the engine into Root) or, for docker, one of the
	// engine's; empty means the backend's default (the host's view).
	Image string `json:"image,omitempty"`
	// Root is Image unpacked from the store, set by the engine: a backend
	// whose Capabilities has RootImages mounts it, read-only, as the root.
	Root *RootImage `json:"-"`
	// Scope groups sandboxes that may share a reused environment (docker's
	// reused containers); empty means no sharing.
	Scope string `json:"scope,omitempty"`
	// Labels are copied to backend objects (containers) and the audit log.
	Labels map[string]string `json:"labels,omitempty"`
}

// RootImage is an unpacked image of execbox's store.
type RootImage struct {
	Ref    string // as the caller named it
	Digest string // the manifest's
	// Dir is the unpacked root on the host: never written by a sandbox
	// (it is mounted read-only, or as an overlay's lower layer).
	Dir string
	// Env are the image's variables (KEY=VALUE), under the call's own.
	Env []string
}

// Network is a network mode. The zero value is NetworkNone.
type Network string

const (
	NetworkNone Network = ""     // an empty network namespace: loopback only
	NetworkHost Network = "host" // the host's network (explicit relaxation)
)

func (n Network) String() string {
	if n == NetworkNone {
		return "none"
	}
	return string(n)
}

// Policy holds the explicit relaxations of the strict default.
type Policy struct {
	// Network is the network mode; zero is none.
	Network Network `json:"network,omitempty"`
	// TmpExec mounts /tmp without noexec.
	TmpExec bool `json:"tmp_exec,omitempty"`
	// Mounts are extra host paths made visible, read-only unless Writable.
	Mounts []Mount `json:"mounts,omitempty"`
	// RootFS replaces the default list of read-only host paths that form the
	// sandbox root (native, bwrap); empty means the backend default.
	RootFS []string `json:"rootfs,omitempty"`
	// EnvAllowlist and EnvAllowPrefix let more host variables through to
	// the program (on top of DefaultEnvAllowlist).
	EnvAllowlist   []string `json:"env_allowlist,omitempty"`
	EnvAllowPrefix []string `json:"env_allowprefix,omitempty"`
	// RunAsUser runs the local backend's process as this host user.
	RunAsUser string `json:"run_as_user,omitempty"`
}

// Mount makes a host path visible inside the sandbox.
type Mount struct {
	Source   string `json:"source"`   // absolute host path; must exist
	Target   string `json:"target"`   // absolute path inside the sandbox
	Writable bool   `json:"writable"` // read-only unless set
}

// Process is one program to run in a sandbox.
type Process struct {
	// Args is the program and its arguments; Args[0] is looked up in the
	// sandbox's PATH when it has no slash.
	Args []string
	// Env adds variables for this process on top of Spec.Env.
	Env map[string]string
	// Dir is the working directory relative to the work dir ("" = work dir).
	Dir string
	// Stdin is read to EOF and fed to the program; nil means empty.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the output as it is produced (the
	// streaming variant); the Result still carries the capped copy.
	Stdout io.Writer
	Stderr io.Writer
	// Timeout shortens the sandbox's wall limit for this process; zero or a
	// larger value means Limits.Wall.
	Timeout time.Duration
	// Lasting marks a helper that lives for as long as a session asks
	// (a session's agent): Timeout, which must be set, is its wall limit
	// even when longer than Limits.Wall, its CPU time limit follows it, its
	// output never ends it, and Stdout and Stderr get all of it (the
	// Result keeps little; see LimitsFor).
	Lasting bool
}

// Validate checks a process before it reaches a backend.
func (p *Process) Validate() error {
	if p == nil || len(p.Args) == 0 || p.Args[0] == "" {
		return Errorf(ErrInvalid, "args_empty", "no program to run: args is empty")
	}
	if p.Lasting && p.Timeout <= 0 {
		return Errorf(ErrInvalid, "timeout_invalid", "a lasting process needs a timeout")
	}
	for _, a := range p.Args {
		if hasNUL(a) {
			return Errorf(ErrInvalid, "args_invalid", "argument contains a NUL byte")
		}
	}
	if p.Dir != "" {
		if err := CheckPath(p.Dir); err != nil {
			return err
		}
	}
	return CheckEnv(p.Env)
}

// Validate checks everything in a Spec that does not need the host.
func (s *Spec) Validate() error {
	if err := s.Limits.Validate(); err != nil {
		return err
	}
	for p := range s.Files {
		if err := CheckPath(p); err != nil {
			return err
		}
	}
	for _, m := range s.Policy.Mounts {
		if !isAbs(m.Source) || !isAbs(m.Target) {
			return Errorf(ErrInvalid, "mount_invalid", "mount %s:%s: both paths must be absolute", m.Source, m.Target)
		}
	}
	switch s.Policy.Network {
	case NetworkNone, NetworkHost:
	default:
		return Errorf(ErrInvalid, "network_invalid", "unknown network mode %q (want none or host)", s.Policy.Network)
	}
	return CheckEnv(s.Env)
}

// WallLimit is the wall-clock limit of running p under l: p.Timeout when it
// is set and shorter than l.Wall (or p is Lasting), else l.Wall.
func (p *Process) WallLimit(l Limits) time.Duration {
	if p.Timeout > 0 && (p.Timeout < l.Wall || p.Lasting) {
		return p.Timeout
	}
	return l.Wall
}

// LimitsFor are the limits p runs under in a sandbox of limits l: l with
// p's wall limit, and for a Lasting process a CPU time limit that follows
// that wall limit, no kill at the output cap and at most 64 KiB of output
// kept in the Result (its output is a protocol the caller reads as it
// comes, through Stdout and Stderr).
func (p *Process) LimitsFor(l Limits) Limits {
	l.Wall = p.WallLimit(l)
	if p.Lasting {
		l.CPUTime = l.Wall.Truncate(time.Second) + 2*time.Second
		l.OutputLimitKill = false
		l.Output = min(l.Output, 64*KiB)
	}
	return l
}
