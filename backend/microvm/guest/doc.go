// Package guest is both ends of the microvm backend's channel into a VM:
// the agent that runs as PID 1 inside the guest (Main) and the host's
// Client. They speak HTTP/2 over one virtio-serial port: one stream per
// call, so an Exec's stdin, stdout and stderr flow while file calls run
// beside it, with HTTP/2's flow control bounding what either side buffers.
//
// Inside, the agent makes the sandbox with another backend (the native
// one: namespaces, cgroups, seccomp and Landlock of the guest kernel), so
// a program sees the same contract as on every backend, and the VM is a
// second wall around it.
package guest
