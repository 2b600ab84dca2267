package testutil

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// MustNew builds a backend with newB for settings s, failing the test on
// an error; B is the backend's own type. A backend that holds host
// resources (a sandbox.Closer) is closed when the test ends.
func MustNew[B sandbox.Backend](t testing.TB, newB func(sandbox.Settings) (sandbox.Backend, error), s sandbox.Settings) B {
	t.Helper()
	b, err := newB(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if c, ok := b.(sandbox.Closer); ok {
		// What the backend holds for its sandboxes (its base dir and the
		// mounts in it) goes when the test ends, as at a server's stop.
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("closing the %s backend: %v", b.Name(), err)
			}
		})
	}
	return b.(B)
}

// Available returns b once its Health says it is available (waiting up to
// wait), and skips the test otherwise (fails it when feature is required).
func Available[B sandbox.Backend](t testing.TB, feature string, b B, wait time.Duration) B {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if h := b.Health(ctx); !h.Available {
		SkipOrFail(t, feature, "%s backend unavailable: %s", b.Name(), h.Reason)
	}
	return b
}

// With returns a backend's default configuration (def) changed by set.
func With[C any](def func() *C, set func(*C)) *C {
	c := def()
	set(c)
	return c
}

// Registered checks that backend name registers itself and that a backend
// built through the registry from settings s (as the engine builds it)
// runs Python with no flags, saying which backend and isolation ran it.
func Registered(t *testing.T, name string, s sandbox.Settings, iso sandbox.Isolation) sandbox.Registration {
	t.Helper()
	r, ok := sandbox.Lookup(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	b, err := r.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(sandbox.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	res, err := sandbox.Run(t.Context(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"python3", "-c", "print(1)"}})
	if err != nil || !res.Succeeded() || res.Stdout != "1\n" || res.Backend != name || res.Isolation != iso {
		t.Fatalf("python3 -c 'print(1)': %v %+v", err, res)
	}
	return r
}

// RequireCgroups skips the test (fails it when feature is required) unless
// b enforces the memory limit with a cgroup.
func RequireCgroups(t testing.TB, feature string, b sandbox.Backend) {
	t.Helper()
	if m := b.Capabilities().Limits["memory"]; !strings.HasPrefix(m, "cgroup") {
		SkipOrFail(t, feature, "no usable cgroups: %s", m)
	}
}

// Tail is the end of s, for failure messages.
func Tail(s string) string {
	if len(s) > 500 {
		return "…" + s[len(s)-500:]
	}
	return s
}

// Variant is one way of doing the same thing in a side-by-side benchmark.
type Variant struct {
	Name string
	Run  func() error
}

// SideBySide runs the variants b.N times each, interleaved in a rotating
// order so that load from elsewhere hits them alike (no variant always
// follows the same other one), after one warm-up run each, and reports
// each one's median and 90th percentile as <name>-p50-ms and -p90-ms.
func SideBySide(b *testing.B, variants []Variant) {
	b.Helper()
	times := make([][]time.Duration, len(variants))
	for i, v := range variants {
		if err := v.Run(); err != nil {
			b.Fatalf("%s: %v", v.Name, err)
		}
		times[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for n := range b.N {
		for k := range variants {
			i := (n + k) % len(variants)
			start := time.Now()
			if err := variants[i].Run(); err != nil {
				b.Fatalf("%s: %v", variants[i].Name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		ReportP50P90(b, v.Name+"-", times[i])
	}
	b.ReportMetric(0, "ns/op") // the sum over variants means nothing
}
