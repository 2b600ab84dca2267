// Package nsinit is the native backend's sandbox init: PID 1 of a fresh
// set of namespaces, which builds the sandbox's file system, drops every
// privilege and runs the program — and the parent side that starts it and
// talks to it.
//
// # Start and protocol
//
// The parent (NewLaunch) starts the init with clone flags for new user,
// mount, PID, network, IPC, UTS and cgroup namespaces and uid/gid maps, an empty
// environment and one extra file: fd 3, one end of a unix stream socket.
// Configuration never travels in argv or the environment (both are
// readable in /proc by the program); it goes over that socket:
//
//  1. parent → init: the Config, a 4-byte length and JSON, sent at once.
//  2. init → parent: the protocol version (one byte) and the id of the
//     thread that will fork the program, in the init's PID namespace (four
//     bytes, big-endian). The parent has SO_PASSCRED set, so the kernel
//     attaches the init's PID as the parent sees it; the parent places the
//     init in its cgroup (cgroup v1, or whenever CLONE_INTO_CGROUP is not
//     used) and that one thread in the program's own pids leaf
//     (cgroups.Cgroup.AddProgramThread; HostTID maps its id) while the init
//     sets up. The thread is locked to the init's main goroutine; the Go
//     runtime starts its later threads from its template thread, so only
//     the program (and this one thread) ever count in the leaf.
//  3. parent → init: the go-ahead byte 'G'. The init waits for it after
//     its mounts, before anything can fork and before it reports even a
//     failed setup (so the parent never places a process that is gone),
//     and exits if the socket closes instead (placement failed).
//  4. init → parent: the Status, a 4-byte length and JSON, once the
//     program has ended (or could not be started). Then the init exits,
//     and the kernel kills whatever is left in its PID namespace.
//
// The init is either a re-execution of the current binary under the
// reexec entry point "nsinit" (registered by this package's init
// function), or the small cmd/execbox-init, which starts about a
// millisecond faster because it links nothing else (Options.InitPath).
//
// # What the init does, in order
//
//   - makes every mount private, mounts a tmpfs as the new root on
//     Config.Root, bind-mounts the host paths of Binds read-only (nosuid,
//     nodev; recursively, with mount_setattr), writes the generated files
//     and symlinks, mounts a fresh /proc (hidepid=2: the program cannot see
//     the init, which it may not ptrace), a read-only /dev holding only
//     bind mounts of the listed device nodes (mknod is not allowed in a
//     user namespace) and the DevLinks symlinks, a /tmp
//     tmpfs of Tmp.Size (noexec unless Tmp.Exec) and the work dir and extra
//     Mounts;
//   - pivot_root into the new root, detaches the old one and remounts the
//     new root read-only; sets the hostname and brings lo up; looks up the
//     program in the sandbox's PATH;
//   - waits for the go-ahead, then unshares the cgroup namespace
//     (NewCgroupNS) now that it sits in its cgroup;
//   - on the one thread that will fork the program: Landlock (writes only
//     below Landlock.RW), the rlimits, empty bounding, ambient and
//     inheritable capability sets, no_new_privs and the seccomp filter;
//   - forks the program with fds 0-2 only (everything else is
//     close-on-exec), as Config.UID/GID with no supplementary groups: the
//     uid change clears its effective and permitted sets, and execve by a
//     non-root user with empty inheritable, ambient and bounding sets leaves
//     nothing;
//   - except when an rlimit binds a whole process (RLIMIT_AS, RLIMIT_DATA,
//     RLIMIT_NPROC: the rootless stand-ins for a cgroup), which must not
//     bind the init while it waits: then a helper (the reexec entry
//     "nsinit-exec", forked with fds 0-2 and its own socket) takes the
//     restrictions and ids on its thread, says it is ready, sets the
//     rlimits and executes the program with raw system calls only;
//   - reaps every child until the program ends, reports and exits.
//
// Per-thread restrictions are deliberate: capability sets, seccomp filters,
// Landlock domains and namespace membership belong to a thread, a forked
// child inherits the forking thread's, and applying them to every thread of
// a Go process costs a stop-the-world per call. The init's other threads
// keep their privileges but run nothing but the Go runtime. Namespaces, in
// contrast, are all made at clone time: a namespace joined by one thread
// leaves the runtime's other threads outside it, visible to the program in
// /proc/1/task.
//
// # Invariants
//
//   - The init's environment is empty, so /proc/1/environ shows nothing.
//   - No fd beyond 0-2 reaches the program.
//   - The init never writes to fds 0-2; everything it has to say goes in
//     the Status.
//   - The init holds no policy: Config says what to do and Validate checks
//     the shape of it; the backend decides.
//
// # Concurrency
//
// Main runs once per process. A Launch is used by one Exec: Serve in one
// goroutine, the supervisor (which starts Cmd) in another, Release after the
// supervisor returns.
package nsinit
