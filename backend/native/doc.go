// Package native is execbox's default backend: Linux namespaces, cgroups,
// seccomp and Landlock, in pure Go, with no external binary and no daemon.
//
// # A sandbox
//
// Create makes the sandbox's cgroup (v2 where its controllers are usable,
// else v1 — see internal/host/cgroups) with the memory (swap included), pids and
// CPU limits, and its work dir under the work root. As root the work dir is
// a tmpfs of Limits.WorkSize mounted on the host, so the work dir's size is
// bounded like /tmp's and nothing the program writes reaches the host's
// disk; Close unmounts it. Rootless, the work dir is a plain directory and
// only RLIMIT_FSIZE bounds each file (Enforcement says so).
//
// Every Exec starts a fresh init (internal/host/nsinit) in new user, mount, PID,
// network, IPC, UTS and cgroup namespaces and runs the program under it:
// a root of read-only bind mounts (DefaultRootFS or Policy.RootFS; /etc
// holds only a few host files and a generated passwd/group of root and
// nobody), a fresh /proc in which even PID 1 (the init) is hidden, a
// minimal /dev, /tmp and /work. The work dir and
// the cgroup's limits carry over between the Execs of a sandbox; /tmp,
// processes and namespaces do not.
//
// # Ids
//
// As root the user namespace maps 0→0 and 65534→65534, nothing else. The
// init is root in it (its capabilities reach no further than its own
// namespaces); the program is 65534 inside and on the host, an
// unprivileged host user, so host file permissions and per-user limits
// apply to it as to any other process of nobody — unlike bubblewrap run as
// root, where the sandbox's user is host root. Rootless (an unprivileged
// execbox with unprivileged user namespaces) one id can be mapped: 65534
// inside is the invoking user outside; the init is that user too and holds
// its setup capabilities as ambient ones, dropped before the program
// starts.
//
// # Limits and how they are enforced
//
//	memory, pids, cpus  cgroup (v2: clone3 CLONE_INTO_CGROUP; v1: the init is moved
//	                    in while it waits for its config, before it can fork).
//	                    Without cgroups: RLIMIT_AS per process, RLIMIT_NPROC
//	                    (counted per user namespace, so per sandbox), no CPU quota.
//	pids                a pids leaf of the sandbox's cgroup holds the program alone
//	                    with exactly the limit: the init's forking thread is moved
//	                    into it before the go-ahead (its later threads start from the
//	                    Go runtime's template thread, outside it), so the program is
//	                    born there; the init's own threads count above the leaf
//	                    (the cgroup allows the limit plus 8 for them).
//	wall                execbox timer; SIGKILL to the init ends the PID namespace.
//	cpu_time            RLIMIT_CPU (SIGXCPU, then SIGKILL a second later).
//	nofile, file_size   RLIMIT_NOFILE (hard), RLIMIT_FSIZE; RLIMIT_CORE is 0.
//	tmp_size            /tmp tmpfs size; /dev/shm is a symlink into /tmp.
//	work_size           the work dir tmpfs (root) or nothing (rootless).
//
// Result.Enforcement names the mechanism per limit, and says "not enforced"
// with the reason where there is none. An OOM kill in the cgroup makes the
// reason memory_limit; a failed program whose cgroup hit its pids limit
// gets pids_limit. Usage (CPU time, peak memory) comes from the cgroup.
//
// # Why it is built this way
//
//   - Config goes to the init over a donated socket (gVisor's pattern), not
//     argv or the environment, which the program could read in /proc.
//   - The parent learns the init's PID from the socket's credentials, not
//     from the exec.Cmd, because internal/host/proc starts the command; that
//     one round trip is also the point where v1 cgroup placement happens.
//   - Every namespace, the network's included, is made at clone time,
//     although creating the network namespace on a second thread while
//     the init mounts was measured ~0.5 ms faster: the Go runtime's other
//     threads of the init would stay in the host's network namespace, and
//     /proc/1/task/N/net would show the program the host's interfaces and
//     connections (TestHostNetworkInvisible guards this).
//   - cmd/execbox-init is used when it sits next to the executable (or
//     native.init_path names it): it starts ~3 ms faster than re-executing
//     the full execbox binary, whose package initialisers (3.3 ms under
//     GODEBUG=inittrace=1, 1.2 of them distribution/reference's regexps)
//     all run before the init's; its own take 0.2 ms. Build it as a
//     release does, CGO_ENABLED=0: linked with cgo (go-landlock's psx) it
//     starts ~0.5 ms slower. Without it (go run) the binary re-executes
//     itself. BenchmarkStart measures both against bare fork/exec and bwrap.
//   - Each bind mount costs about as much as starting a small program, so
//     the default rootfs is short and /dev has five nodes.
//   - The seccomp filter is compiled once in execbox and sent as bytes; the
//     init only loads it.
//
// # Cleanup
//
// Close kills what runs, removes the cgroup, unmounts and removes the work
// dir. On first use the backend reconciles: cgroups left by dead execbox
// processes (cgroups.Manager.Reconcile) and work dirs under the work root
// whose owning process is gone (each process keeps its work dirs below
// <work root>/native/<pid>.<random>; leftover mounts there are detached
// first). Reconcile does the same on demand.
//
// # Files
//
// The host probe, health cache (an answer is kept for good: the host is
// probed once), reconcile, close, the cgroup and work dir, WriteFiles and
// Artifacts are backend/internal/hostbase's. This package keeps its
// phases: native.go (config, registration), probe_linux.go (seccomp,
// Landlock, the init binary, the enforcement table, health texts),
// create_linux.go (the file-system plan) and exec_linux.go (the init's
// config, its start and its status).
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is too, as package
// sandbox says: one Exec at a time (a second gets ErrBusy "sandbox_busy",
// from sandbox.Lifecycle), WriteFiles and Artifacts at any time (one after
// the other, alongside an Exec), and Close at any time, ending a running
// Exec.
package native
