package main

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/sandbox"
)

// podBackend is the local backend as a Pod's agent runs it: processes and
// open files held to what the container allows (the agent runs as uid
// 65534 and cannot raise its hard limits, so asking for more would fail
// every run), and a program the kernel's OOM killer ended in the Pod's
// memory cgroup reported as memory_limit (the Pod's limit is the memory
// bound: the host asks for no RLIMIT_DATA).
func podBackend(s sandbox.Settings) (sandbox.Backend, error) {
	b, err := local.New(s)
	return podLocal{b}, err
}

type podLocal struct{ sandbox.Backend }

func (b podLocal) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil && uint64(spec.Limits.Pids) > r.Max {
		spec.Limits.Pids = int(r.Max)
	}
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil && uint64(spec.Limits.NoFile) > r.Max {
		spec.Limits.NoFile = int(r.Max)
	}
	sb, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	f, _ := sb.(sandbox.Files)
	return podSandbox{sb, f}, nil
}

// podSandbox is a local sandbox whose results name the OOM killer.
type podSandbox struct {
	sandbox.Sandbox
	sandbox.Files
}

func (s podSandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	before := oomKills()
	res, err := s.Sandbox.Exec(ctx, p)
	if res != nil && res.Signal == "SIGKILL" && res.Reason == sandbox.ReasonSignaled && oomKills() > before {
		res.Reason = sandbox.ReasonMemoryLimit
		res.Message = "killed by the kernel's OOM killer at the Pod's memory limit"
	}
	return res, err
}

// oomKills is the container's memory cgroup's OOM kill count (cgroup v2's
// memory.events, v1's memory.oom_control), 0 when neither can be read.
func oomKills() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}
