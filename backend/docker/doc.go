// Package docker is the backend that runs sandboxes as hardened containers
// of a Docker engine, driven through the Engine API
// (github.com/moby/moby/client); it never runs the docker CLI. Isolation is
// "process" (namespaces on the host kernel), or "kernel" when docker.runtime
// is runsc (gVisor).
//
// # Shape
//
// A Sandbox is one container whose PID 1 is a tiny keeper shell; Create
// creates and starts it, so every Exec is one exec into a running container
// and the whole one-shot run is Create → WriteFiles → Exec → Artifacts →
// Close (container removed). With docker.reuse_container and a Spec.Scope, a
// scope's sandboxes lease one long-lived container instead: each run is one
// exec, and between sandboxes the container is wiped (every process but
// the keeper killed, /work, /tmp and /dev/shm emptied). Idle reused
// containers are removed after docker.idle_timeout and by Backend.Close.
//
// Every container gets seed 004's hardening and more: no pull (a missing
// image is ErrUnavailable naming it and `execbox image build python
// --offline`), the name execbox-<id>, network none (host only by policy), a
// read-only root, cap-drop ALL, no-new-privileges, execbox's own seccomp
// profile (Docker's default still allows io_uring), pids, memory with swap
// equal to it, CPUs, user 65534:65534, /tmp a noexec,nosuid tmpfs of
// limits.tmp_size with mode 1777 (uid 65534 cannot write a --tmpfs without
// it), /work a tmpfs volume of limits.work_size (the Engine API copies into
// and out of a volume of a running container, but not a --tmpfs), /dev/shm
// of 1 MiB instead of Docker's 64 MiB, a private IPC and cgroup namespace,
// ulimits nofile (Docker's default is about a million), fsize and cpu, log
// driver none, no host mount and never the Docker socket, and the labels
// execbox.instance, execbox.owner, execbox.run, execbox.expires.
//
// Each program runs as `env -i VARS /bin/sh -c WRAPPER`: only the
// allowlisted environment reaches it (the image's own ENV does not); the
// wrapper kills what an earlier run left, runs the program, then kills its
// whole tree (kill -9 -1 inside the PID namespace spares only the keeper).
// stdout and stderr are demultiplexed into execbox's capped captures; the
// wall-clock limit and output caps are execbox's; on timeout or cancel the
// tree is killed by one more exec, or, when even that cannot run (a fork
// bomb at the pids limit), the container is killed. An exec that ends by
// SIGKILL is reported as memory_limit when the engine logged an "oom" event
// for the container between its start and its end. Docker reports a
// signal as exit code 128+N, so an exit code in 129..192 is read as a
// signal.
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
// the configured image is present and a probe container ran /bin/true.
//
// # Leftovers
//
// Containers and volumes carry the owning process (host, boot, PID
// namespace, PID and its start time) and an expiry (MaxAge). On its first
// contact with the engine a Backend reconciles: it removes what belongs to
// owners on this machine that are dead (kill -9, crash) and what has
// expired; live owners' containers are left alone. Backend.Close (found by
// the engine through an optional `Close() error`) removes every container
// the backend made.
//
// # Concurrency
//
// A Backend is safe for concurrent use. A Sandbox is used by one goroutine
// at a time, except Close, which may be called at any time and ends a
// running Exec (its tree is killed, the result says canceled). A reused
// container serves one sandbox at a time; concurrent sandboxes of a scope
// get containers of their own, and only one idle container per scope (and
// configuration) is kept.
package docker
