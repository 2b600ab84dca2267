package cgroups

import (
	"fmt"

	"github.com/execbox/execbox/sandbox"
)

// Explain adds a cgroup's view of one run to res and returns the reason it
// set, or "" when it left res.Reason alone.
//
// A cgroup's counters run over the sandbox's life, so this run's share is
// what changed from before (the reading after the last run; zero for a fresh
// cgroup) to after. Usage is always filled in. A run that failed and was not
// killed by the caller (killed: timeout, cancel, output limit) is then
// explained by the limit it hit: an OOM kill as memory_limit, even over a
// sandbox_error (with cgroup v2's memory.oom.group it takes the init, and
// its status, with the program); a refused fork as pids_limit (the exit
// code stays the program's), but never over a sandbox_error, which a
// refused fork does not explain. A run that succeeded after a refused fork
// keeps its reason, with a Message that names the limit. A zero
// l.Pids blames no refused fork on the program: the cgroup's pids limit is
// then not the program's (gVisor's host backstop).
func Explain(res *sandbox.Result, before, after Stats, l sandbox.Limits, killed bool) sandbox.Reason {
	res.Usage.CPU = max(after.CPU-before.CPU, 0)
	if after.PeakMemory > 0 {
		res.Usage.PeakMemory = after.PeakMemory
	}
	if killed {
		return ""
	}
	if res.Succeeded() {
		if l.Pids != 0 && after.PidsLimitHits > before.PidsLimitHits {
			// The program coped: it succeeded, but say the limit was hit.
			res.Message = pidsMessage(l.Pids, "the program went on and exited 0")
		}
		return ""
	}
	switch {
	case after.OOMKills > before.OOMKills:
		res.Reason = sandbox.ReasonMemoryLimit
		res.Message = fmt.Sprintf("the memory limit of %s was reached; the kernel's OOM killer ended %d process(es)",
			sandbox.HumanSize(l.Memory), after.OOMKills-before.OOMKills)
		return res.Reason
	case res.Reason == sandbox.ReasonSandboxError || l.Pids == 0:
		// Keep the error; or no pids limit of the program's to blame.
	case after.PidsLimitHits > before.PidsLimitHits:
		res.Reason = sandbox.ReasonPidsLimit
		res.Message = pidsMessage(l.Pids, "")
		return res.Reason
	}
	return ""
}

// pidsMessage says that the limit of pids processes was reached, and what
// the program did then when that is known.
func pidsMessage(pids int, then string) string {
	m := fmt.Sprintf("the limit of %d processes was reached (a fork or clone failed)", pids)
	if then != "" {
		m += "; " + then
	}
	return m
}
