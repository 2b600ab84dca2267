package microvm

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkStart times a sandbox's start (Create) and a first /bin/true
// in it, side by side: a cold boot, and a warm VM taken from the pool (the
// pool refilled before each). It also reports an idle VM's resident memory
// on the host (QEMU's RSS after the run).
func BenchmarkStart(b *testing.B) {
	be := newBackend(b)
	spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 192 * sandbox.MiB}} // a shape of its own
	cold := built(*config(func(c *Config) { c.Warm = 0 }), sandbox.Settings{WorkRoot: b.TempDir()})
	defer cold.Close()
	_, adm, _ := be.Admit(spec)
	view, _ := be.view(adm)
	sh := shapeOf(adm.Limits, viewKey(view))
	for _, v := range []struct {
		name string
		be   *Backend
		wait func()
	}{
		{"cold", cold, func() {}},
		{"warm", be, func() {
			be.pool.Refill(sh, be.bootWarm(sh, view))
			for len(be.pool.Idle(sh)) == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var create, first []time.Duration
			var rss []float64
			for range b.N {
				v.wait()
				t0 := time.Now()
				sb, err := v.be.Create(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/true"}})
				if err != nil || !res.Succeeded() {
					b.Fatalf("%v %+v", err, res)
				}
				create, first = append(create, t1.Sub(t0)), append(first, time.Since(t0))
				rss = append(rss, vmRSS(sb.(*vmSandbox).vm.cmd.Process.Pid))
				sb.Close(context.Background())
			}
			testutil.ReportP50(b, "create-", create)
			testutil.ReportP50(b, "first-exec-", first)
			var sum float64
			for _, r := range rss {
				sum += r
			}
			b.ReportMetric(sum/float64(len(rss)), "qemu-rss-MiB")
		})
	}
}

// vmRSS is a process's resident memory in MiB.
func vmRSS(pid int) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
