// Package bwrap runs sandboxes with bubblewrap (the bwrap binary), under
// the same policy as the native backend: the host view of internal/host/hostview
// read-only, a size-limited noexec /tmp and work dir, every namespace
// unshared, uid 65534, no capabilities, execbox's seccomp filter and a
// cgroup for memory, pids and CPU. Isolation level: process. It needs
// root (to start bwrap as another user and to mount the tmpfs) and
// unprivileged user namespaces.
//
// # One Exec
//
// execbox starts bwrap as host uid/gid 65534 (no supplementary groups),
// with an empty environment and exactly these fds:
//
//	0-2  the program's stdin, stdout, stderr
//	3    control socket (config to the init, status back)
//	4    execbox's own executable, opened once
//	5    bwrap's arguments, NUL-separated (--args 5), so /proc/1/cmdline
//	     in the sandbox shows none of them
//	6    the seccomp program (--seccomp 6; internal/host/seccomp.Bytes)
//	7    --info-fd: bwrap reports the sandbox's host PID
//	8    --block-fd: the sandbox waits here until it is in its cgroup
//	9…   one memfd per generated /etc file (--file)
//
// and argv `bwrap --args 5 -- /proc/self/fd/4 execbox-reexec:bwrap-init`
// (internal/host/reexec's marker of the entry point as the one argument: bwrap
// sets argv[0] itself). The arguments are, in order:
//
//	--unshare-all [--share-net for network=host] --die-with-parent
//	--new-session --as-pid-1 --uid 65534 --gid 65534 --cap-drop ALL
//	--hostname sandbox --seccomp 6 --info-fd 7 --block-fd 8
//	--perms 0755 --dir /etc
//	--ro-bind P P                      each bind of the hostview.View
//	--symlink T P                      the merged-/usr links
//	--perms 0644 --file 9 /etc/passwd  … group, hosts, hostname
//	--proc /proc
//	--size 65536 --perms 0755 --tmpfs /dev
//	--dev-bind /dev/N /dev/N           null zero full random urandom
//	--symlink /proc/self/fd /dev/fd    … stdin stdout stderr, shm → /tmp
//	--remount-ro /dev
//	--bind <sandbox>/tmp /tmp --bind <work dir> /work
//	--ro-bind|--bind <sandbox>/mN T    each extra mount
//	--remount-ro /
//
// bwrap's user namespace maps 65534 to host 65534 and nothing else, so the
// program (and bwrap, and the init) are an unprivileged host user to whom
// host permissions and per-user limits apply; bwrap started as root would
// map the sandbox's user to host root instead.
//
// /tmp and the work dir: bwrap cannot mount a tmpfs noexec, so both are
// host tmpfs mounts made by execbox (size and inode limits, nosuid, nodev,
// noexec unless tmp_exec) that bwrap binds; a bind keeps its source's
// flags, and in bwrap's user namespace they are locked. /tmp is mounted
// fresh for each Exec, the work dir once per sandbox. Extra mounts are
// host binds below the sandbox's directory with their restrictions set
// (read-only unless writable, noexec when writable unless tmp_exec), which
// bwrap binds in turn; so bwrap also reaches sources its uid could not.
//
// The program's pids: the sandbox's cgroup has a pids leaf of the program's
// own holding exactly Limits.Pids of its tasks (hostbase.Options.ProgramLeaf).
// After reading its config the init reports the id of its locked main
// thread, execbox moves that thread into the leaf and sends a go-ahead, and
// only then does the init fork the program, which is born in the leaf; the
// init's other threads and bwrap count in the cgroup above it (the limit
// plus 10 for them).
//
// The cgroup: bwrap writes the sandbox's host PID to the info fd right
// after clone; the sandbox sets up its mounts and waits on the block fd.
// execbox moves it and the bwrap monitor into the cgroup (v1) — on cgroup
// v2 bwrap is started in it (CLONE_INTO_CGROUP) — and writes one byte.
// Only then does anything run that could fork. The block fd is never
// closed while the sandbox waits on it unplaced (EOF would let it go on):
// it is SIGKILLed through a pidfd first.
//
// The init: with --as-pid-1 bwrap has no PID-1 helper of its own (which
// would hold the launcher's environment); PID 1 is execbox's executable,
// run through fd 4 as the registered reexec entry point "bwrap-init". It
// is not dumpable (the program can neither ptrace it nor read its /proc
// files), marks every fd above 2 close-on-exec, reads the config (argv,
// env, work dir, rlimits: nofile, fsize, cpu, core 0) from the socket in
// internal/host/nsinit's framing (WriteMsg/ReadMsg), starts the
// program, reaps until it ends and reports the exact wait status — bwrap
// alone folds a signal into exit code 128+n. It catches the signals on
// which the Go runtime would exit, so kill(1, …) from the program cannot
// end it. When it exits the kernel ends the PID namespace.
//
// # Known bwrap pitfalls, closed (pitfalls_linux_test.go)
//
//   - bwrap's PID-1 helper keeps the launcher's environment, readable in
//     /proc/1/environ: bwrap starts with an empty environment and there is
//     no helper (--as-pid-1); our init is not dumpable.
//   - bwrap passes every inherited fd through: inherited fds of execbox
//     are made close-on-exec before each start (Go opens all of its own
//     close-on-exec, so the only fds this touches are ones execbox
//     inherited, which no sandbox is meant to have); the init marks all
//     above 2 close-on-exec before the program starts.
//   - --dev brings an unbounded /dev/shm (and ptmx, pts): /dev is a small
//     read-only tmpfs with five device binds; /dev/shm points into /tmp.
//   - bwrap run by root maps the sandbox's uid to host root: bwrap runs as
//     host 65534.
//   - bwrap has no seccomp policy of its own: ours goes in with --seccomp.
//
// Not closed: the cgroup namespace is made at clone, before the sandbox
// is moved into its cgroup (v1), so /proc/self/cgroup shows the sandbox's
// cgroup relative to execbox's (e.g. /../execbox/execbox-<pid>-<id>). bwrap
// creates /tmp/.bubblewrap-65534 (or /run/user/65534/.bubblewrap) once on
// the host as its own mount point. Landlock is not applied (bwrap has no
// support for it); the root, its binds and /dev are read-only mounts.
//
// # Availability
//
// Health starts /bin/true in a real sandbox and caches the outcome for a
// minute. A bwrap that is installed but cannot create its namespaces
// (unprivileged user namespaces disabled, a container's seccomp profile)
// is unavailable, with bwrap's own message as the reason. The work root
// must be reachable by uid 65534 (every directory above it searchable).
//
// # Cleanup
//
// Close kills what runs (cgroup), removes the cgroup, detaches every mount
// below the sandbox's directory, checks none is left and removes the
// directory (so a writable bind's source is never emptied). On first use
// the backend reconciles cgroups of dead execbox processes and the
// <pid>.<random> directories of processes that are gone, mounts first.
//
// # Files
//
// The host probe, health cache, reconcile, close, the sandbox's directory,
// cgroup and work dir, WriteFiles and Artifacts are backend/internal/hostbase's.
// This package keeps its phases: bwrap.go (config, registration),
// probe_linux.go (finding bwrap, the enforcement table, health texts),
// create_linux.go (host binds, /tmp's mount point), args_linux.go (bwrap's
// argument list), exec_linux.go (starting bwrap, placing and releasing the
// sandbox, killing it) and init_linux.go (the sandbox's PID 1).
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is too, as package
// sandbox says: one Exec at a time (a second gets ErrBusy "sandbox_busy",
// from sandbox.Lifecycle), WriteFiles and Artifacts at any time (one after
// the other, alongside an Exec), and Close at any time, ending a running
// Exec.
package bwrap
