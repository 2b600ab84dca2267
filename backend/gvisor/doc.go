// Package gvisor is the "gvisor" backend: every Exec runs the program in a
// fresh gVisor sandbox (`runsc run`) from an OCI bundle, so the program
// talks to gVisor's user-space kernel (the sentry), never to the host
// kernel. Its isolation level is sandbox.IsolationKernel.
//
// # The sandbox
//
// The bundle's root is a small skeleton directory made per sandbox and
// marked read-only: mount points, the merged-/usr symlinks and the
// generated /etc files (passwd, group, hosts, hostname). On top of it is
// the host view every host-sharing backend uses (internal/hostview):
// read-only bind mounts of /usr and a few /etc entries. /tmp and /dev/shm
// are gVisor tmpfs mounts with a size; /work is the sandbox's work dir
// (internal/workdir) on a size-limited host tmpfs, bind-mounted read-write;
// /proc, /sys and /dev are gVisor's own. The program runs as uid and gid
// 65534 with no capabilities, no_new_privs, execbox's seccomp policy
// (enforced by the sentry, --oci-seccomp), the rlimits nofile, fsize, cpu,
// nproc and core=0, network "none" (gVisor's netstack, loopback only)
// unless the policy asks for the host's, and exactly the environment
// sandbox.BuildEnv returns.
//
// Limits on the whole sandbox come from a cgroup made with internal/cgroups
// before runsc starts and named in the bundle (linux.cgroupsPath): runsc
// starts the sentry and the gofer inside it, and the sentry sizes its
// memory to the cgroup's limit. A program that passes the memory limit
// gets the whole sandbox OOM-killed by the host kernel; the result says
// "memory_limit". CPU time is watched on the cgroup, because not every
// runsc release enforces RLIMIT_CPU. Result.Enforcement names every
// mechanism.
//
// # Processes and state
//
// Each sandbox has its own directory under the work root: the bundle
// (config.json and the skeleton root), runsc's --root state dir, runsc's
// logs and the work dir. The container id is execbox-<sandbox id>. Exec
// runs `runsc run` under internal/proc. Killing it (timeout, cancel, output
// limit, CPU limit, Close) is `runsc kill --all <id> KILL` and a moment for
// runsc to take the sandbox down, then SIGKILL to whatever of the sandbox is
// left in its cgroup (sentry, gofer, ptrace stubs), then the runsc process.
// Afterwards `runsc delete --force` runs if runsc left state behind, and
// cgroup leaves runsc made in other hierarchies are removed. The program's
// real wait status (exit code or signal) is read from the "Exiting with
// status" line the sentry's boot process logs (info level, no debug
// logging), since runsc's own exit code folds signals into 128+n.
//
// Nothing outlives a sandbox: after Close no runsc, gofer or sentry
// process, no cgroup, no mount and no directory of it is left. Directories
// and cgroups of a crashed execbox (a dead <pid>) are removed on first use.
//
// # Platform and runsc releases
//
// runsc's platform is chosen once: systrap where runsc offers it, else
// ptrace. kvm is never chosen on its own: it needs hardware virtualisation
// and, with older runsc releases under nested virtualisation, can hang.
// Health says which platform is in use.
//
// Known gaps of older runsc releases (Debian 12's 2022 one among them),
// none of which weakens isolation: RLIMIT_CPU is not enforced (execbox's
// cgroup watch is); a rule's seccomp errnoRet is ignored (execbox uses
// SCMP_ACT_TRACE where it wants ENOSYS); stat and statx with
// AT_NO_AUTOMOUNT fail with EINVAL, so `ls PATH` and `stat PATH` from
// coreutils 9 fail; a FIFO made inside the sandbox lives in the sentry's
// memory, never in the work dir.
//
// # Files
//
// The host probe, health cache, reconcile, close, the sandbox's directory,
// cgroup and work dir, WriteFiles and Artifacts are
// backend/internal/hostbase's. This package keeps its phases: gvisor.go
// (config, registration), probe_linux.go (runsc and its platform, the
// enforcement table, health texts), create_linux.go and rootfs_linux.go
// (the bundle's directories and root skeleton), bundle_linux.go (the OCI
// spec of one Exec), exec_linux.go (running, watching CPU time, killing
// and cleaning up after runsc), runsc_linux.go (runsc's command line and
// logs), cgroup_linux.go (the cgroup leaves runsc makes) and
// seccomp_linux.go (the policy in OCI form).
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is used by one goroutine
// at a time, except Close, which may be called at any time from any
// goroutine and ends a running Exec.
package gvisor
