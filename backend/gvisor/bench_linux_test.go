package gvisor

import (
	"context"
	"os/exec"
	"testing"
	"time"

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
	variants := []struct {
		name string
		run  func() error
	}{
		{"bare", func() error {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			return cmd.Run()
		}},
		{"gvisor", func() error { return testutil.Check(sandbox.Run(context.Background(), gb, sandbox.Spec{}, p)) }},
		{"gvisor-exec", func() error { return testutil.Check(live.Exec(context.Background(), p)) }},
		{"runsc-do", func() error {
			cmd := exec.Command(r.path, append([]string{"--root=" + doRoot, "--platform=" + r.platform, "--network=none", "do"}, args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			cmd.Dir = doRoot
			return cmd.Run()
		}},
	}
	times := make([][]time.Duration, len(variants))
	for i, v := range variants {
		if err := v.run(); err != nil { // warm-up
			b.Fatalf("%s: %v", v.name, err)
		}
		times[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for n := range b.N {
		for k := range variants {
			i := (n + k) % len(variants)
			start := time.Now()
			if err := variants[i].run(); err != nil {
				b.Fatalf("%s: %v", variants[i].name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		testutil.ReportP50P90(b, v.name+"-", times[i])
	}
	b.ReportMetric(0, "ns/op") // the sum over variants means nothing
}
