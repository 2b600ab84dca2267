package kubernetes

import (
	"testing"

	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// closeSkip: the suite watches a closed sandbox's tree through its work
// dir on the host or Artifacts; a Pod's is in the node's memory and gone
// with the Pod. TestCloseDuringExecEndsThePod shows Close ends the Exec
// and the Pod.
var closeSkip = sandboxtest.Skip("a Pod's work dir is on its node and goes with it; TestCloseDuringExecEndsThePod shows Close ends the Exec and deletes the Pod",
	"close/during_exec")

// noNode: the sandbox image (execbox-python, execbox image build python)
// has Python and no node.
var noNode = sandboxtest.WithoutNode("the sandbox image " + DefaultImage + " (execbox image build python) has no node")

// leaks: the warm Pod (its attach and its HTTP/2 connection) is kept for
// the next sandbox; a leak per run still shows, the runs outnumber it.
var leaks = []sandboxtest.Option{sandboxtest.WithLeakRuns(12), sandboxtest.WithLeakHeld(8)}

// TestConformance: the suite on Pods of the cluster's default runtime
// (runc).
func TestConformance(t *testing.T) {
	b := newBackend(t, "kubernetes", nil)
	sandboxtest.Run(t, b, append(leaks, closeSkip, noNode)...)
}

// TestConformanceGVisor: the suite on Pods of RuntimeClass gvisor.
func TestConformanceGVisor(t *testing.T) {
	b := newBackend(t, "kubernetes-gvisor", func(c *Config) { c.RuntimeClass, c.Isolation = "gvisor", "kernel" })
	sandboxtest.Run(t, b, append(leaks, closeSkip, noNode,
		// The quota holds (the spinners measure about the quota, in
		// cores, each second), but Usage.CPU is what gVisor's own kernel
		// counted for the program, about twice the spinners' own
		// measure; the host cgroup's count is not reachable from the Pod.
		sandboxtest.Skip("Usage.CPU under gVisor is its sentry's count (about twice the program's own measure here), not the host cgroup's the check compares",
			"limits/cpu_quota"))...)
}
