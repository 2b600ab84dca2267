// Package microvm is the backend whose sandboxes are virtual machines:
// one QEMU "microvm" per sandbox, with a guest kernel of its own, no
// network device and RAM as the memory bound (isolation "vm").
//
// The guest is built from the host's own files (offline, cached in
// microvm.cache): Debian's kernel, extracted from its bzImage to an ELF
// that boots without firmware, and an initramfs holding execbox-guest —
// our static init, PID 1 of the VM — and the virtio and 9p modules it
// loads. The host's view (/usr and the rest of hostview's root list) is
// bind-mounted into a directory QEMU shares read-only over 9p as the
// guest's root. The agent then makes the sandbox with the native backend
// inside the VM, so the program meets the same contract as everywhere,
// and the VM is a second, stronger wall. Host and agent talk HTTP/2 over
// one virtio-serial port (package guest).
//
// QEMU runs as nobody (-runas), in namespaces of its own, under its seccomp
// filter (-sandbox on), in a cgroup of RAM + 384 MiB, and dies with
// execbox (PDEATHSIG); a crashed execbox's VMs are reaped by the cgroup
// and work-dir reconciliation at the next start.
//
// KVM is used only when a guest really boots under it (the verdict is
// kept per host boot in the cache): an openable /dev/kvm may belong to a
// nested hypervisor that runs only kernels built for it. Otherwise the
// VMs run under TCG, software emulation, which Capabilities marks
// Emulated: the engine's auto then never picks the backend. Warm VMs
// (microvm.warm per sandbox shape) hide the boot: each serves one
// sandbox, then goes. They follow calls, not health probes: a probe
// (sandbox.Probing) boots a VM of its own and leaves the pool alone, so a
// backend that nothing but probes uses holds no VM between them.
package microvm
