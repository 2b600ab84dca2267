// Package seccomp holds execbox's one seccomp policy and renders it in the
// three forms the backends need: a classic BPF program installed by the
// native init right before execve (Install), the raw struct sock_filter
// array that `bwrap --seccomp FD` reads (Bytes), and a Docker/OCI JSON
// profile (DockerProfile).
//
// # The policy
//
// A default-deny allowlist. The allowed syscalls are those of Docker's
// default profile (github.com/moby/profiles/seccomp, DefaultProfile)
// evaluated for a process with no capabilities on the running architecture,
// so every capability-conditional entry is left out. On top of that the
// syscalls listed by Blocked are denied even where Docker's list has them:
// Docker lets a process without capabilities call adjtimex, clock_adjtime,
// name_to_handle_at, ptrace and process_vm_readv/writev; the other entries
// guard against a future Docker list that adds them. Three syscalls follow
// our rules, not Docker's:
//
//   - clone is allowed only when no CLONE_NEW* flag is set, so threads and
//     fork work but no namespace can be created;
//   - clone3 fails with ENOSYS, because its flags live in memory that BPF
//     cannot read; libc then falls back to clone, which is checked;
//   - personality is allowed only for PER_LINUX, PER_LINUX32, UNAME26, their
//     combination and the 0xffffffff query, so ADDR_NO_RANDOMIZE and
//     READ_IMPLIES_EXEC cannot be set.
//
// socket is allowed only for the address families Docker allows (AF_ALG and
// AF_VSOCK, for example, are denied).
//
// Any other syscall fails with EPERM. EPERM, not ENOSYS, because it is what
// Docker answers too, so a program sees the same errors under every backend;
// and because ENOSYS invites libc and language runtimes to try an older
// fallback path, while EPERM says plainly "not allowed here". The one place
// where ENOSYS is wanted (clone3) says so explicitly.
//
// The program checks the audit architecture first: a syscall made through a
// foreign ABI (for example int 0x80 from an x86_64 process) gets the default
// EPERM, and an x32 syscall on x86_64 gets ENOSYS; none of them reaches the
// allowlist. The JSON profile names only the native architecture, so
// libseccomp in runc kills a foreign-ABI caller instead.
//
// The program is a binary search over syscall numbers (tree_linux.go):
// about 19 instructions decide any syscall, where a linear list of the 300
// allowed ones took up to 308, and the kernel, which runs the filter for
// every syscall number when it is installed (to cache the always-allowed
// ones), installs it in ~160 µs instead of ~530 µs. The argument checks
// (clone, personality, socket) are assembled by
// github.com/elastic/go-seccomp-bpf, which the search jumps to for those
// syscalls. Only the native architecture is supported (x86_64 and arm64);
// Program returns an error elsewhere.
//
// # Invariants
//
//   - Program, Bytes and DockerProfile describe the same policy; all three are
//     built once from one list and cached.
//   - Install sets no_new_privs and installs the filter on every thread of
//     the process (SECCOMP_FILTER_FLAG_TSYNC); it is inherited across fork,
//     clone and execve and cannot be removed. Call it once, last before
//     execve.
//
// # Concurrency
//
// Program, Bytes, DockerProfile and Blocked are safe for concurrent use and
// return fresh copies. Install affects the whole process; it is meant for a
// single-purpose init process.
package seccomp
