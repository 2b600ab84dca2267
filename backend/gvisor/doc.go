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
// the host view every host-sharing backend uses (internal/host/hostview):
// read-only bind mounts of /usr and a few /etc entries. /tmp and /dev/shm
// are gVisor tmpfs mounts with a size; /work is the sandbox's work dir
// (internal/host/workdir) on a size-limited host tmpfs, bind-mounted read-write;
// /proc, /sys and /dev are gVisor's own. The program runs as uid and gid
// 65534 with no capabilities, no_new_privs, execbox's seccomp policy
// (enforced by the sentry, --oci-seccomp), the rlimits nofile, fsize, cpu,
// nproc and core=0, network "none" (gVisor's netstack, loopback only)
// unless the policy asks for the host's, and exactly the environment
// sandbox.BuildEnv returns.
//
// # The seccomp policy
//
// The sentry reads an OCI seccomp policy unlike libseccomp: it resolves
// names through runsc's own syscall table and silently drops names the
// table lacks (runsc before 2023-01 calls pselect6 "pselect", so select(2)
// was denied), answers every SCMP_ACT_ERRNO with EPERM, and ignores the
// architectures. The policy is therefore translated by number for the
// runsc in use (`runsc help syscalls`, seccomp_linux.go): every number
// runsc knows gets the policy's rule under runsc's name, what the policy
// wants ENOSYS for (clone3) and what runsc does not implement at all (no
// name reaches it) answer ENOSYS (SCMP_ACT_TRACE with no tracer), as
// gVisor does without a policy. TestSyscallTable holds every syscall of
// the host's table to that: each one the policy allows answers exactly as
// without a policy, each one it denies EPERM.
//
// What runsc says about itself (version, platforms, flags, the syscall
// table: four runsc starts, 50–150 ms) is kept in the state dir
// (gvisor-runsc.json) under the binary's inode, size and mtime, so a CLI
// call does not ask again; a rebuilt runsc is asked anew, and a kept file
// that someone else could have written is ignored.
//
// Limits on the whole sandbox come from a cgroup made with internal/host/cgroups
// before runsc starts and named in the bundle (linux.cgroupsPath): runsc
// starts the sentry, the gofer and the platform's stub processes inside it
// (and nothing else: `runsc run` itself stays outside and runs no program
// code), and the sentry sizes its memory to the cgroup's limit. A program
// that passes the memory limit gets the whole sandbox OOM-killed by the
// host kernel; the result says "memory_limit". The cpus limit is the
// cgroup's quota, measured on the host; a program that measures its own
// CPU time inside (getrusage, /proc, time) gets the sentry's figure, which
// counts the time the host throttled its threads as running and so can
// exceed the limit. CPU time is watched on the cgroup, because not every
// runsc release enforces RLIMIT_CPU. Result.Enforcement names every
// mechanism.
//
// Limits.Pids is the sentry's RLIMIT_NPROC: it counts every task (process
// and thread) of the sandbox's uid, all of which are the program's, and
// refuses a fork beyond it with EAGAIN. The host cgroup's pids limit is
// only a backstop (16 × limit + 256) for the sentry's own threads and the
// stubs. Nothing on the host sees the sentry refuse a fork, so the sentry
// straces the fork family (clone, clone3, fork, vfork) into runsc's log,
// and a failed run with a fork refused with EAGAIN says "pids_limit".
//
// # Processes and state
//
// Each sandbox has its own directory under the work root: the bundle
// (config.json and the skeleton root), runsc's --root state dir, runsc's
// logs and the work dir. The container id is execbox-<sandbox id>. Exec
// runs `runsc run` under internal/host/proc. Killing it (timeout, cancel, output
// limit, CPU limit, Close) is `runsc kill --all <id> KILL` and a moment for
// runsc to take the sandbox down, then SIGKILL to whatever of the sandbox is
// left in its cgroup (sentry, gofer, ptrace stubs), then the runsc process.
// Afterwards `runsc delete --force` runs if runsc left state behind, any
// mount runsc left in its root is detached, and cgroup leaves runsc made
// in other hierarchies are removed.
//
// The log of runsc's run and boot commands (info level, no debug logging)
// is a FIFO that execbox reads while runsc runs (runlog_linux.go): a
// program that forks in a loop makes the sentry log without end, and none
// of it lands on the host's disk; only the wait status, the refused forks
// and the last few lines are kept. The program's real wait status (exit
// code or signal) is the "Exiting with status" line the sentry's boot
// process logs, since runsc's own exit code folds signals into 128+n.
//
// When runsc fails, its error (the --log file, JSON) is the result's
// message; runsc prints it to its stderr too, which is the program's, and
// it is cut from the captured stderr and held back from the live one (the
// last line of each write waits up to 100 ms). A program that is not there
// exits 127, one that cannot be executed 126, with reason "exited", as
// from a shell or `docker run`; any other runsc failure is
// "sandbox_error".
//
// Nothing outlives a sandbox: after Close no runsc, gofer or sentry
// process, no cgroup, no mount and no directory of it is left. Directories
// and cgroups of a crashed execbox (a dead <pid>) are removed on first use.
//
// # Health
//
// Health starts /bin/true in a sandbox, then the smoke check every
// backend passes to be ready (hostbase, sandbox.Smoke): listing and stat
// (statx as coreutils 9 calls it, which runsc 2022 fails), files in /tmp
// and the work dir, fork and wait, select and poll through the policy, a
// burst of output arriving whole. A backend whose smoke check fails is
// available (a run that names it works) but not ready (auto and tiers pass
// it by), and the reason names the check.
//
// # Platform and runsc releases
//
// runsc's platform is chosen once: systrap where runsc offers it (current
// releases), else ptrace (Debian 12's). kvm is never chosen on its own: it
// needs hardware virtualisation and, with older runsc releases under
// nested virtualisation, can hang. Health says which platform is in use.
// Every flag the backend passes is checked against `runsc flags`: --root,
// --platform, --network, --oci-seccomp, --log, --debug-log,
// --debug-command, --strace and --strace-syscalls mean the same from 2022
// to today; --gofer-network-namespace=new is passed where runsc knows it
// (current releases otherwise pin a network namespace with a bind mount
// in --root, which here is one sandbox's).
//
// Supported: current runsc, built statically from the Go module proxy by
// scripts/runsc.sh (tested: gvisor.dev/gvisor/runsc@v0.0.0-20260905035102-
// 160fafc42237; the CI uses it), and Debian 12's runsc 0.0~20221219, which
// runs everything above but is never ready: it fails statx with
// AT_NO_AUTOMOUNT (EINVAL), so `ls PATH` and `stat PATH` from coreutils 9
// fail, and no sound workaround exists in execbox (its fstatat rejects the
// flag too). Its other gaps, none of which weakens isolation: only ptrace,
// where every syscall costs host context switches, so syscall-heavy
// programs (unbuffered output) are slower than with systrap; RLIMIT_CPU is
// not enforced (execbox's cgroup watch is); it implements neither openat2
// nor the syscalls added since (ENOSYS). Both releases: a rule's seccomp
// errnoRet is ignored (see above); a FIFO made inside the sandbox lives in
// the sentry's memory, never in the work dir. Current releases compile the
// policy more slowly (about 30 ms of CPU per run, most of it the argument
// rules of socket).
//
// # Files
//
// The host probe, health cache, reconcile, close, the sandbox's directory,
// cgroup and work dir, WriteFiles and Artifacts are
// backend/internal/hostbase's. This package keeps its phases: gvisor.go
// (config, registration), probe_linux.go (runsc and its platform, the
// enforcement table, health texts), health_linux.go (the smoke checks),
// create_linux.go (the bundle's directories; its root skeleton is
// internal/host/skeleton's, over an image of the store when the spec
// names one), bundle_linux.go (the OCI spec of one Exec), exec_linux.go
// (running, watching CPU time, killing and cleaning up after runsc),
// runsc_linux.go (runsc's command line, errors and stderr), runlog_linux.go
// (the run log), cgroup_linux.go (the cgroup leaves runsc makes) and
// seccomp_linux.go (the policy for the sentry).
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is used by one goroutine
// at a time, except Close, which may be called at any time from any
// goroutine and ends a running Exec.
package gvisor
