// Package binfacts keeps what a host binary said about itself — its
// version line, its flags, its syscall table — between execbox processes,
// in a file of the state dir, under the binary's identity (device, inode,
// size and modification time).
//
// Asking a binary costs a process start per question, which every CLI call
// would otherwise pay (`auto` probes each backend it passes by); a
// replaced or rebuilt binary has another identity and is asked again. A
// kept file counts only when this user alone can have written it, since
// what it says can shape a sandbox (gVisor's seccomp policy is built from
// runsc's syscall table).
package binfacts
