package kubernetes

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// TestWarmPods: a Create starts a Pod of its shape in the background
// (kubernetes.warm, 1 by default); the next Create of that shape is that
// Pod, and its sandbox works; a Create of another shape, or with a session
// label, is not; Close deletes the warm Pods.
func TestWarmPods(t *testing.T) {
	b := newBackend(t, "kubernetes", nil)
	ctx := context.Background()
	waitWarm := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); b.pool.Len() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d warm Pods after 90 s, want %d", b.pool.Len(), n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	mine := func() []string {
		var names []string
		for _, p := range pods(t, b) {
			if p.Annotations[AnnotationOwner] == b.me.String() && p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	create := func(spec sandbox.Spec) sandbox.Sandbox {
		t.Helper()
		sb, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(context.Background()) })
		return sb
	}

	first := create(sandbox.Spec{})
	waitWarm(1)
	var warm string
	for _, n := range mine() {
		if n != "execbox-"+first.ID() {
			warm = n
		}
	}
	second := create(sandbox.Spec{})
	if got := "execbox-" + second.ID(); got != warm {
		t.Fatalf("the second sandbox is Pod %s, not the warm %s", got, warm)
	}
	res, err := second.Exec(ctx, &sandbox.Process{Args: []string{"sh", "-c", "echo warm"}})
	if err != nil || res.Stdout != "warm\n" {
		t.Fatalf("exec in the warm Pod: %+v, %v", res, err)
	}
	waitWarm(1)

	// A health probe's Pod is its own: the warm one stays, and none is
	// started after it.
	idle, existing := b.pool.Len(), mine()
	probe, err := b.Create(sandbox.Probing(ctx), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(existing, "execbox-"+probe.ID()) {
		t.Fatal("a probe's Create took a warm Pod")
	}
	probe.Close(ctx)
	def := sandbox.Spec{Limits: sandbox.Limits{}.WithDefaults(b.defaults)}
	if sh, _ := shapeOf(def); b.pool.Len() != idle || b.pool.Pending(sh) != 1 {
		t.Fatalf("after a probe: %d warm Pods (%d of the default shape waiting or starting), want %d and 1", b.pool.Len(), b.pool.Pending(sh), idle)
	}

	before := mine()
	labelled := create(sandbox.Spec{Labels: map[string]string{"session": "s1"}})
	other := create(sandbox.Spec{Limits: sandbox.Limits{Memory: 200 * sandbox.MiB}})
	for _, sb := range []sandbox.Sandbox{labelled, other} {
		if slices.Contains(before, "execbox-"+sb.ID()) {
			t.Fatalf("sandbox %s took a warm Pod of another shape", sb.ID())
		}
	}
	// The labelled one left the pool alone; the other shape gets its own.
	waitWarm(2)

	for _, sb := range []sandbox.Sandbox{first, second, labelled, other} {
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(mine()) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("after Close, Pods are left: %v", mine())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWarmPodsFollowDemand: with kubernetes.warm_max above warm, a burst
// of Creates of one shape grows the pool past its floor — to the arrivals
// of a Pod's start time — with no further arrival; Warm (what /v1/health
// and /metrics report) says so and why; the next burst, as large as what
// waits, is served by warm Pods only (issue 42).
func TestWarmPodsFollowDemand(t *testing.T) {
	b := newBackend(t, "kubernetes", func(c *Config) { c.Warm, c.WarmMax = 1, 4 })
	ctx := context.Background()
	burst := func(n int) (warm int) {
		t.Helper()
		waiting := map[string]bool{}
		for _, w := range b.pool.Idle(shapeOfDefault(b)) {
			waiting[w.id] = true
		}
		var wg sync.WaitGroup
		ids := make(chan string, n)
		for range n {
			wg.Go(func() {
				sb, err := b.Create(ctx, sandbox.Spec{})
				if err != nil {
					t.Error(err)
					return
				}
				ids <- sb.ID()
				sb.Close(ctx)
			})
		}
		wg.Wait()
		close(ids)
		for id := range ids {
			if waiting[id] {
				warm++
			}
		}
		return warm
	}
	burst(10) // 10 arrivals at once: a rate of 1/s, decaying
	var w []sandbox.Warm
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		w = b.Warm()
		if len(w) == 1 && w[0].Target >= 2 && w[0].Idle == w[0].Target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("90 s after 10 arrivals at once, the pool holds %+v; want 2 or more waiting", w)
		}
	}
	t.Logf("after a burst of 10: %+v", w[0])
	if !strings.Contains(w[0].Shape, DefaultImage+", memory ") || !strings.Contains(w[0].Why, "arrivals/s ×") || !strings.HasSuffix(w[0].Why, "within 1..4") {
		t.Errorf("the pool's report: %+v", w[0])
	}
	if n := w[0].Idle; burst(n) != n {
		t.Fatalf("a burst of the %d waiting was not all served warm", n)
	}
}

// shapeOfDefault is the shape of a spec of the default limits.
func shapeOfDefault(b *Backend) shape {
	sh, _ := shapeOf(sandbox.Spec{Limits: sandbox.Limits{}.WithDefaults(b.defaults)})
	return sh
}
