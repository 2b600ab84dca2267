package cgroups

import (
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func TestExplain(t *testing.T) {
	l := sandbox.Limits{Memory: 64 << 20, Pids: 32}
	// The cgroup has run before: counters are cumulative.
	before := Stats{CPU: 2 * time.Second, PeakMemory: 10 << 20, OOMKills: 1, PidsLimitHits: 3}
	same := before
	same.CPU, same.PeakMemory = 3*time.Second, 20<<20
	oom := same
	oom.OOMKills = 3
	pids := same
	pids.PidsLimitHits = 4
	both := oom
	both.PidsLimitHits = 4

	exited := func(code int) sandbox.Result {
		return sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: code, Message: "orig"}
	}
	sandboxErr := sandbox.Result{Reason: sandbox.ReasonSandboxError, ExitCode: -1, Message: "orig"}
	signaled := sandbox.Result{Reason: sandbox.ReasonSignaled, ExitCode: -1, Signal: "SIGKILL", Message: "orig"}
	timeout := sandbox.Result{Reason: sandbox.ReasonTimeout, ExitCode: -1, Signal: "SIGKILL", Message: "orig"}

	tests := []struct {
		name    string
		res     sandbox.Result
		after   Stats
		l       sandbox.Limits
		killed  bool
		want    sandbox.Reason // returned; "" = res.Reason unchanged
		wantMsg string         // substring of the message
	}{
		{"oom grew", signaled, oom, l, false, sandbox.ReasonMemoryLimit, "memory limit of 64 MiB was reached; the kernel's OOM killer ended 2 process(es)"},
		{"oom grew over sandbox_error", sandboxErr, oom, l, false, sandbox.ReasonMemoryLimit, "OOM killer ended 2"},
		{"oom beats pids", exited(1), both, l, false, sandbox.ReasonMemoryLimit, "OOM killer"},
		{"pids grew", exited(1), pids, l, false, sandbox.ReasonPidsLimit, "limit of 32 processes was reached"},
		{"pids grew but sandbox_error", sandboxErr, pids, l, false, "", "orig"},
		{"pids grew without a pids limit", exited(1), pids, sandbox.Limits{Memory: l.Memory}, false, "", "orig"},
		{"oom grew but killed", timeout, oom, l, true, "", "orig"},
		{"pids grew but killed", timeout, pids, l, true, "", "orig"},
		{"succeeded after a refused fork", exited(0), both, l, false, "", "limit of 32 processes was reached (a fork or clone failed); the program went on and exited 0"},
		{"succeeded, pids grew without a pids limit", exited(0), pids, sandbox.Limits{Memory: l.Memory}, false, "", "orig"},
		{"succeeded, nothing grew", exited(0), same, l, false, "", "orig"},
		{"failed, nothing grew", exited(1), same, l, false, "", "orig"},
		{"sandbox_error, nothing grew", sandboxErr, same, l, false, "", "orig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res
			got := Explain(&res, before, tt.after, tt.l, tt.killed)
			if got != tt.want {
				t.Errorf("Explain returned %q, want %q", got, tt.want)
			}
			wantReason := tt.want
			if wantReason == "" {
				wantReason = tt.res.Reason
			}
			if res.Reason != wantReason {
				t.Errorf("Reason = %q, want %q", res.Reason, wantReason)
			}
			if !strings.Contains(res.Message, tt.wantMsg) {
				t.Errorf("Message = %q, want it to contain %q", res.Message, tt.wantMsg)
			}
			if res.ExitCode != tt.res.ExitCode || res.Signal != tt.res.Signal {
				t.Errorf("exit %d %q changed to %d %q", tt.res.ExitCode, tt.res.Signal, res.ExitCode, res.Signal)
			}
			// Usage is this run's share, in every case.
			if res.Usage.CPU != time.Second || res.Usage.PeakMemory != 20<<20 {
				t.Errorf("Usage = %+v, want CPU 1s and PeakMemory %d", res.Usage, 20<<20)
			}
		})
	}
}

func TestExplainUsageBounds(t *testing.T) {
	// A counter that went backwards (a recreated cgroup) is no negative CPU.
	res := sandbox.Result{Reason: sandbox.ReasonExited, Usage: sandbox.Usage{PeakMemory: 7}}
	Explain(&res, Stats{CPU: 5 * time.Second}, Stats{CPU: 4 * time.Second}, sandbox.Limits{}, false)
	if res.Usage.CPU != 0 {
		t.Errorf("CPU = %v, want 0", res.Usage.CPU)
	}
	// No peak reported by the kernel keeps what the backend measured.
	if res.Usage.PeakMemory != 7 {
		t.Errorf("PeakMemory = %d, want 7 kept", res.Usage.PeakMemory)
	}
	// A fresh cgroup: before is zero, the share is all of after.
	res = sandbox.Result{Reason: sandbox.ReasonExited}
	Explain(&res, Stats{}, Stats{CPU: time.Millisecond, PeakMemory: 1}, sandbox.Limits{}, false)
	if res.Usage.CPU != time.Millisecond || res.Usage.PeakMemory != 1 {
		t.Errorf("Usage = %+v, want 1ms and 1 byte", res.Usage)
	}
}
