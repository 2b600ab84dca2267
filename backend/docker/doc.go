// Package docker is the backend that runs sandboxes as hardened containers
// of a Docker engine, driven through the Engine API
// (github.com/moby/moby/client); it never runs the docker CLI. Isolation is
// "process" (namespaces on the host kernel), or "kernel" when docker.runtime
// is runsc (gVisor). runsc applies a container's seccomp profile only with
// --oci-seccomp in the engine's runtime arguments; health checks in a
// probe container that the profile is in force (unshare(CLONE_NEWUSER)
// denied) and is not ready otherwise.
//
// # Shape
//
// A Sandbox is one container whose PID 1 is a keeper shell (see keeper)
// and whose stdin, stdout and stderr execbox holds through one attach
// connection from before the container starts to its end: the keeper's
// channel. A program runs by one line down that channel; the keeper starts
// it under the wrapper (see wrapper), and its output comes back up the
// same connection, ended by the wrapper's trailers, which carry the exit
// status, whether a signal ended it, and the container cgroup's counters.
// No exec, no inspect: a run costs a few milliseconds, not the ~30 ms of a
// runc exec. A program whose stdin is a stream of unknown length runs
// through an exec instead (the same wrapper, the stream after the token
// line). The one-shot run is Create → WriteFiles → Exec → Artifacts →
// Close.
//
// Create takes a container started ahead when docker.pool_size > 0 (one
// that has run nothing but its keeper, per limits profile; when the
// sandbox closes, after its result is out, a replacement is started in the
// background), else creates, attaches and starts one.
// Either way the container serves that one sandbox and is never reused.
// With docker.reuse_container and a Spec.Scope, a scope's sandboxes lease
// one long-lived container instead, wiped in between (every process but
// the keeper killed, /work, /tmp and /dev/shm emptied). Idle reused and
// pooled containers are removed after docker.idle_timeout and by
// Backend.Close.
//
// Close has the keeper kill every process and exit (it answers before it
// exits, so Close returns once nothing of the sandbox runs, in about a
// millisecond); the engine removes the stopped container and its volume
// (AutoRemove) with no goroutine of execbox's waiting for it.
// Backend.Close waits until the engine removed every container this
// backend made (they carry its execbox.backend label), and removes any the
// engine did not remove in 20 s.
//
// Every container gets seed 004's hardening and more: --rm (AutoRemove),
// no pull (a missing image is ErrUnavailable naming it and `execbox image
// build python --offline`), the name execbox-<id>, network none (host only
// by policy), a read-only root, cap-drop ALL, no-new-privileges, execbox's
// own seccomp profile (Docker's default still allows io_uring), pids
// (Limits.Pids plus the 3 processes execbox keeps in the container while a
// program runs: the program's own tasks are Limits.Pids at most, and reach
// it), memory with swap equal to it, CPUs, user 65534:65534, stdin open
// (-i), /tmp a noexec,nosuid tmpfs of limits.tmp_size with mode 1777 (uid
// 65534 cannot write a --tmpfs without it), /work a tmpfs volume of
// limits.work_size (the Engine API copies into and out of a volume of a
// running container, but not a --tmpfs), /dev/shm of 1 MiB instead of
// Docker's 64 MiB, a private IPC and cgroup namespace, ulimits nofile
// (Docker's default is about a million), fsize and cpu, log driver none, no
// docker-init, SIGKILL as the stop signal (docker stop and the engine's
// shutdown need not wait for a keeper that ignores SIGTERM), no host mount
// but the configured extra mounts (Policy.Mounts, such as the tools dirs:
// bind mounts, read-only unless asked, only from an engine on a unix
// socket, whose host is this one) and never the Docker socket, and the labels execbox.instance,
// execbox.owner, execbox.backend, execbox.run, execbox.expires.
//
// # Results
//
// Each program runs as `env -i VARS /bin/sh -c WRAPPER`: only the
// allowlisted environment reaches it (the image's own ENV does not). The
// rule for exit codes is the shell's and docker run's: a program that is
// not there is a Result with Reason exited, ExitCode 127 and a Message; one
// that is there but not executable, 126; a missing Process.Dir is the
// caller's error (ErrInvalid dir_not_found); otherwise the program's own
// status, above 128 too. A signal is Signal (and Reason signaled, or the
// limit it stands for: cpu_limit for SIGXCPU, file_size_limit for SIGXFSZ),
// never 128+N: the wrapper tells them apart by whether the shell that
// waited for the program reported a signal. A shell does not report
// SIGINT and SIGPIPE, so a program that dies of one of those two reads as
// exit 130 or 141; a program that kills the shell waiting for it loses its
// status (sandbox_error). A program that failed after the kernel's OOM killer
// acted in the container (the cgroup's oom_kill counter) is memory_limit;
// one that failed after a fork or clone was refused (pids.events max) is
// pids_limit. The wall-clock limit and output caps are execbox's: on
// timeout, cancel or an output cap with kill, the keeper kills every
// process but itself with no new process (so a fork bomb at the pids
// limit cannot stop it), or, when the keeper does not answer, the
// container is killed. Usage.CPU is the cgroup's CPU time during the run;
// Usage.PeakMemory is the container cgroup's peak so far (for the first
// program of a one-shot sandbox, that program's peak).
//
// Input files go in with one archive upload (CopyToContainer) after every
// path is checked (and, once a program has run, every existing prefix is
// stat'ed, so no write passes through a symlink the program planted);
// artifacts come out of one archive download (CopyFromContainer) in which
// symlinks stay symlinks and are listed in Skipped, never followed.
//
// # Engine
//
// The engine is docker.host, else DOCKER_HOST, else the local socket; of
// the environment only EnvAllowlist is read. The client connects lazily:
// an engine that is down makes Health unavailable and every operation
// ErrUnavailable (code engine_unavailable) naming the address, and the
// next operation after it is back simply works. Health is ready only when
// the configured image is present, a probe container ran /bin/true and
// one passed the smoke check every backend passes (sandbox.Smoke).
//
// An engine not on a unix socket (tcp://, ssh://) may be on another host:
// the backend is then Remote, refuses host mounts, and its Capacity (the
// engine's CPUs, fewer when its memory holds fewer sandboxes of the default
// limits) sizes its own admission lane instead of this host's cores.
//
// # Leftovers and the backstop
//
// A container outlives its execbox only as long as the engine takes to
// notice that execbox's attach ended: the engine then closes the
// container's stdin (StdinOnce), the keeper reads end of file, kills
// everything and exits, and the engine removes the container (AutoRemove)
// — a kill -9 of execbox, mid-run or idle, leaves nothing after a fraction
// of a second, with no execbox running. The keeper is PID 1, which nothing
// inside the container can kill or stop. What this cannot cover: an
// engine that does not remove stopped containers (it died with them; its
// restart removes AutoRemove containers), a container created but never
// started, and a program that, while execbox is gone, holds the keeper's
// stdin open itself (it may reopen /proc/1/fd/0 for writing: same uid).
// For those, containers and volumes carry the owning process (host, boot,
// PID namespace, PID and its start time) and an expiry (MaxAge): on its
// first contact with the engine a Backend reconciles, removing what
// belongs to owners on this machine that are dead and what has expired;
// live owners' containers are left alone.
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox runs one Exec at a time
// (a second is ErrBusy); its file operations (sandbox.Files, in
// sessionfiles.go) may run alongside it and each other, each an exec of its
// own — though an Exec starting or ending kills every process of the
// sandbox user, so a file operation it meets is retried, or fails with
// ErrBusy when it cannot be. Close may be called at any time and ends a
// running Exec (its tree is killed, the result says canceled). A container
// runs one program at a time. A reused container serves one sandbox at a
// time; concurrent sandboxes of a scope get containers of their own, and
// only one idle container per scope (and configuration) is kept.
package docker
