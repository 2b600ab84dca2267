package gvisor

import (
	"context"
	"os/exec"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkPython times start-to-exit of `python3 -I -S -c pass`, side by
// side in one run, the variants interleaved in a rotating order so that
// load from elsewhere hits them alike:
//
//	bare         fork/exec/wait from Go, no isolation
//	gvisor       one-shot sandbox.Run (Create, Exec, Artifacts, Close)
//	gvisor-exec  one Exec in a live sandbox (a fresh runsc run each time)
//	runsc-do     `runsc do` with the same platform and no network: runsc's
//	             own quickest path, for reference (root inside, overlay
//	             root, no cgroup limits, no seccomp policy)
//
// Each variant reports its median and 90th percentile in milliseconds:
//
//	go test -run '^$' -bench Python -benchtime 50x ./backend/gvisor/
func BenchmarkPython(b *testing.B) {
	gb := newBackend(b)
	args := []string{"/usr/bin/python3", "-I", "-S", "-c", "pass"}
	p := &sandbox.Process{Args: args}
	live := testutil.Create(b, gb, sandbox.Spec{})
	r := gb.Host().Own.runsc
	doRoot := b.TempDir()
	testutil.SideBySide(b, []testutil.Variant{
		{Name: "bare", Run: func() error {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			return cmd.Run()
		}},
		{Name: "gvisor", Run: func() error { return testutil.Check(sandbox.Run(context.Background(), gb, sandbox.Spec{}, p)) }},
		{Name: "gvisor-exec", Run: func() error { return testutil.Check(live.Exec(context.Background(), p)) }},
		{Name: "runsc-do", Run: func() error {
			cmd := exec.Command(r.path, append([]string{"--root=" + doRoot, "--platform=" + r.platform, "--network=none", "do"}, args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			cmd.Dir = doRoot
			return cmd.Run()
		}},
	})
}
