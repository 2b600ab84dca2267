package kubernetes

import (
	"context"
	"slices"
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
