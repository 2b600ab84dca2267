// Package guest is both ends of the channel to an agent that runs in a
// sandbox's own machine, and the sandbox that forwards every call to it:
// the microvm backend's VM (the agent is PID 1, Main, over a virtio-serial
// port) and the kubernetes backend's Pod (the agent is the container's
// process, ServeStdio, over the Pod's attach). Host and agent speak HTTP/2:
// one stream per call, so an Exec's stdin, stdout and stderr flow while
// file calls run beside it, with HTTP/2's flow control bounding what
// either side buffers. The host's Client trusts nothing the agent sends.
//
// Inside, the agent makes the sandbox with another backend (in a VM the
// native one: namespaces, cgroups, seccomp and Landlock of the guest
// kernel; in a Pod the local one, the Pod being the isolation), so a
// program sees the same contract as on every backend. Sandbox is the
// host's side of it.
package guest
