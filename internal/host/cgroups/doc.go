// Package cgroups puts a sandbox's process tree into a cgroup with limits,
// reads what it used, and kills and removes it.
//
// # Choosing v1 or v2
//
// Open looks at the host once. It uses cgroup v2 when the unified hierarchy
// offers the memory, pids and cpu controllers to the cgroup this process is
// in and it can enable them for children. A hybrid host (like systemd's
// "hybrid" layout) often mounts cgroup2 with no controllers at all, because
// every controller is bound to a v1 hierarchy; that mount is useless for
// limits, so Open does not pick it. It then uses cgroup v1 when the memory,
// pids, cpu, cpuacct and freezer hierarchies are mounted and writable
// (co-mounted hierarchies such as "cpu,cpuacct" are handled: one directory
// per hierarchy). Otherwise the version is "none" and Reason says why —
// typically rootless without delegation, or a read-only /sys/fs/cgroup.
//
// Where the cgroups live: on v2 under the cgroup this process is in (the
// subtree it was delegated), as <own>/execbox/execbox-<pid>-<id>. When the
// own cgroup holds processes and is not the root, v2's "no internal
// processes" rule forbids enabling controllers for children, so Open moves
// this process into <own>/execbox.daemon first (only this process; if
// others share the cgroup, v2 is reported unusable). On v1 there is no
// delegation model; like Docker's cgroupfs driver the parent sits at the
// root of each hierarchy as visible in this mount namespace:
// <mount>/execbox/execbox-<pid>-<id>. The parent "execbox" is created when
// missing and left in place; leaves are removed by Close.
//
// # Limits and what enforces them
//
//	memory  v2 memory.max + memory.swap.max=0   v1 memory.limit_in_bytes + memory.memsw.limit_in_bytes
//	pids    v2 pids.max                         v1 pids.max
//	cpu     v2 cpu.max                          v1 cpu.cfs_quota_us / cpu.cfs_period_us
//	kill    v2 cgroup.kill                      v1 freezer FROZEN → SIGKILL all → THAWED, until empty
//
// The program's own pids leaf (Limits.ProgramPids): a backend whose init
// runs in the sandbox's cgroup with the program (native, bwrap) gives the
// program a child cgroup "program" whose pids.max is the program's limit
// (plus the one init thread that forks it), so the init's own threads never
// give the program room beyond its limit. Only the init's forking thread is
// moved there (AddProgramThread); what it forks is born in the leaf. On v1
// the leaf exists in the pids hierarchy only and the thread moves through
// its tasks file; on v2 it is a threaded child (cgroup.type "threaded",
// only pids enabled in the sandbox cgroup's subtree_control, so the
// sandbox cgroup may still hold the init's process) and the thread moves
// through cgroup.threads. Procs, Kill, Stats (the pids limit hits of both)
// and Close cover the leaf.
//
// Memory includes swap (memory+swap = Limits.Memory). Without swap
// accounting (no memsw / swap.max files) swap is not limited and
// Mechanisms says so. A zero limit field means "no limit".
//
// # Invariants
//
//   - A leaf is named execbox-<pid>-<id>, <pid> being the daemon that made
//     it. Reconcile removes leaves whose <pid> is dead, and leaves with this
//     process's PID that this process did not create (a previous daemon
//     with the same PID, e.g. PID 1 in a container). A dead daemon's PID
//     reused by an unrelated live process keeps its leftovers until that
//     process ends.
//   - Kill returns only when no process is left in the cgroup (or reports
//     how many are left after its deadline). Processes are counted from
//     cgroup.procs, which does not list zombies, so an unreaped child does
//     not keep a cgroup busy.
//   - On v1, Add writes the PID into every hierarchy in turn; a process
//     that forks between those writes leaves a child behind in some
//     hierarchies. Add a process before it runs untrusted code (e.g. while
//     it waits on a pipe). On v2 prefer FD with CLONE_INTO_CGROUP, which
//     has no window at all.
//
// # Concurrency
//
// A Manager is immutable after Open and safe for concurrent use. A Cgroup
// is safe for concurrent use: Kill and Close are serialised, Stats and Add
// may run at any time. Close is idempotent.
package cgroups
