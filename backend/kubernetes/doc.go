// Package kubernetes is the backend that runs each sandbox as a Pod of a
// Kubernetes cluster, created and driven through the API server with
// client-go: when one machine is not enough, the cluster its users already
// operate schedules the sandboxes.
//
// # Shape
//
// A sandbox is one Pod (kubernetes.namespace) of two containers: an init
// container of kubernetes.agent_image copies execbox-guest into an
// emptyDir, and the sandbox container, of kubernetes.image (or
// Spec.Image), runs it as `execbox-guest pod` with its stdin held open
// (stdinOnce). execbox attaches to that container (the attach
// subresource, WebSocket with an SPDY fallback) and speaks to the agent
// through its stdin and stdout the same HTTP/2 protocol the microvm
// backend speaks over its virtio-serial port (package internal/host/guest):
// Exec with its stdin and output streamed, the session file calls,
// Artifacts. Inside, the agent makes the sandbox with the local backend:
// the Pod is the isolation, the local backend the runner (environment
// allowlist, rlimits, wall limit and output caps, the whole process tree
// killed at the end, typed reasons, artifacts that never follow a symlink).
// One attach per sandbox: a run costs a stream on it, not an exec's round
// trips through the kubelet and the runtime.
//
// # Hardening
//
// Every Pod gets: no service account token, no service links, the
// isolation's labels and a NetworkPolicy that selects them and allows no
// ingress and no egress (made once per namespace, kept), DNS policy None
// with loopback as the only name server, runAsNonRoot as 65534:65534, a read-only root, all
// capabilities dropped, allowPrivilegeEscalation false, seccomp
// RuntimeDefault, memory and CPU limits from the Spec (memory reserved
// whole, a tenth of the CPU), /work and /tmp as memory-backed emptyDirs of work_size and
// tmp_size (their pages count against the Pod's memory, so its limit is
// memory + work + tmp + the agent's 64 MiB), activeDeadlineSeconds as the
// wall backstop (kubernetes.max_age), restartPolicy Never, and, when
// kubernetes.runtime_class is set, that RuntimeClass (gvisor, kata), whose
// isolation level kubernetes.isolation names.
//
// # Lifetime
//
// Close hangs up; the agent ends the sandbox and exits, and the Pod is
// deleted and waited for until the API server no longer has it. A killed
// execbox leaves Pods only as long as the kubelet takes to see the attach
// gone (the container's stdin closes, the agent exits, the Pod ends);
// Reconcile, at start and at every probe interval, deletes ended Pods of
// the backend, Pods whose owner (an annotation: host, boot, PID namespace,
// PID and start time) is certainly dead, and expired ones.
//
// # Warm Pods
//
// A Pod takes seconds to start (scheduling, the init container, two
// container starts); its sandbox, milliseconds to set up. So after each
// Create the backend starts Pods of that spec's shape (image and limits;
// the two shapes used last) in the background, attached and waiting for
// their agent's setup, and the next Create of that shape takes one. How
// many follows demand (backend/internal/warm): the shape's arrivals of
// the time a Pod takes to start, at least kubernetes.warm and at most
// kubernetes.warm_max (which Capacity keeps out of the admission lane);
// Warm reports each shape's count and why. Each serves one sandbox and is deleted with it; Close deletes
// the waiting ones, and Reconcile those of a killed execbox. A health
// probe's Pod (sandbox.Probing) neither takes a warm Pod nor has one
// started after it.
package kubernetes
