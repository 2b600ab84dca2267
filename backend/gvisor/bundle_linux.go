package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/sandbox"
)

// ociSpec is the bundle for running p in s.
func (s *Sandbox) ociSpec(p *sandbox.Process) *specs.Spec {
	l := p.LimitsFor(s.Spec.Limits)
	fixed := map[string]string{"HOME": hostview.WorkDir, "TMPDIR": hostview.Tmp, "PATH": "/usr/local/bin:/usr/bin:/bin"}
	env := sandbox.BuildEnv(os.Environ(), s.Spec.Policy, fixed, s.Spec.Env, p.Env)
	cpu := uint64(max(l.CPUTime/time.Second, 1))
	rl := []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Soft: uint64(l.NoFile), Hard: uint64(l.NoFile)},
		{Type: "RLIMIT_FSIZE", Soft: uint64(l.FileSize), Hard: uint64(l.FileSize)},
		// SIGXCPU at the soft limit (reason cpu_limit), SIGKILL a second later.
		{Type: "RLIMIT_CPU", Soft: cpu, Hard: cpu + 1},
		// No core files: they would land in /work.
		{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
		// The sentry counts the sandbox's threads of uid 65534.
		{Type: "RLIMIT_NPROC", Soft: uint64(l.Pids), Hard: uint64(l.Pids)},
	}
	if s.Cgroup == nil {
		// No cgroup: a per-process stand-in, named in Enforcement.
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_AS", Soft: uint64(l.Memory), Hard: uint64(l.Memory)})
	}
	v := s.view
	noexec := func(exec bool, opts ...string) []string {
		if !exec {
			opts = append(opts, "noexec")
		}
		return opts
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: hostview.Tmp, Type: "tmpfs", Source: "tmpfs",
			Options: noexec(v.Exec, "nosuid", "mode=1777", "size="+strconv.FormatInt(l.TmpSize, 10))},
		// gVisor's own /dev/shm is not writable by the program; POSIX
		// shared memory (Python's multiprocessing) needs it.
		{Destination: "/dev/shm", Type: "tmpfs", Source: "tmpfs",
			Options: noexec(v.Exec, "nosuid", "mode=1777", "size="+strconv.FormatInt(l.TmpSize, 10))},
	}
	for _, b := range v.Binds {
		mounts = append(mounts, specs.Mount{Destination: b.Target, Type: "bind", Source: b.Source,
			Options: noexec(b.Exec, "rbind", "ro", "nosuid")})
	}
	mounts = append(mounts, specs.Mount{Destination: hostview.WorkDir, Type: "bind", Source: s.Work.Path,
		Options: noexec(v.Exec, "rbind", "rw", "nosuid")})
	for _, m := range v.Mounts {
		mode := "ro"
		if m.Writable {
			mode = "rw"
		}
		mounts = append(mounts, specs.Mount{Destination: m.Target, Type: "bind", Source: m.Source,
			Options: noexec(m.Exec, "rbind", mode, "nosuid")})
	}
	nss := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}}
	if s.Spec.Policy.Network != sandbox.NetworkHost {
		nss = append(nss, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	sp := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: hostbase.UID, GID: hostbase.GID, AdditionalGids: []uint32{hostbase.GID}},
			Args:            p.Args,
			Env:             env,
			Cwd:             path.Join(hostview.WorkDir, p.Dir),
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         rl,
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: hostview.Hostname,
		Mounts:   mounts,
		Linux: &specs.Linux{
			Namespaces: nss,
			Seccomp:    s.seccomp,
		},
	}
	if s.Cgroup != nil {
		sp.Linux.CgroupsPath = s.Cgroup.Path()
	}
	return sp
}

// writeBundle writes config.json for p.
func (s *Sandbox) writeBundle(p *sandbox.Process) error {
	data, err := json.Marshal(s.ociSpec(p))
	if err != nil {
		return fmt.Errorf("encoding the OCI spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.paths.bundle, "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("writing the OCI spec: %w", err)
	}
	return nil
}
